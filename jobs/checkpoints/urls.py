from django.urls import path

from jobs.checkpoints import api

urlpatterns = [
    path("jobs/<id:job_id>/checkpoints", api.JobCheckpointsView.as_view(), name="job-checkpoints"),
    path(
        "jobs/<id:job_id>/checkpoints/<str:which>/download",
        api.JobCheckpointDownloadView.as_view(),
        name="job-checkpoint-download",
    ),
]
