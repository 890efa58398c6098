from django.urls import path

from jobs import logs_api

urlpatterns = [
    path("jobs/<id:job_id>/logs", logs_api.job_logs, name="job-logs"),
]
