from django.urls import path

from jobs.outputs import api

urlpatterns = [
    path("jobs/<id:job_id>/outputs", api.JobOutputsView.as_view(), name="job-outputs"),
    path("jobs/<id:job_id>/outputs.tar", api.JobOutputsArchiveView.as_view(), name="job-outputs-archive"),
    path("jobs/<id:job_id>/outputs/<path:path>", api.JobOutputFileView.as_view(), name="job-output-file"),
]
