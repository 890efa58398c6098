"""The jobs' plain async views (their waits hold no thread): the log reader and the blocking read of a job."""

from django.urls import path

from jobs import logs_api
from jobs.api import wait

urlpatterns = [
    path("jobs/<id:job_id>/logs", logs_api.job_logs, name="job-logs"),
    path("jobs/<id:job_id>/wait", wait.job_wait, name="job-wait"),
]
