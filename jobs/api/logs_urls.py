"""The jobs' views that wait holding no thread: the log reader (async) and the blocking read of a job (a sync view
whose wait runs on the event loop after the middleware chain: euler.synchandler.Deferred)."""

from django.urls import path

from jobs import logs_api
from jobs.api import wait

urlpatterns = [
    path("jobs/<id:job_id>/logs", logs_api.job_logs, name="job-logs"),
    path("jobs/<id:job_id>/wait", wait.job_wait, name="job-wait"),
]
