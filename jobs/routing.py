"""Websocket routes of the jobs app (collected by config/routing.py)."""

from django.urls import path

from jobs.consumers import JobLogsConsumer

websocket_urlpatterns = [
    path("ws/jobs/<id:job_id>/logs/", JobLogsConsumer.as_asgi()),
]
