from django.urls import path

from jobs.outputs import node_api

urlpatterns = [
    path("attempts/<id:attempt_id>/outputs", node_api.ManifestView.as_view(), name="node-attempt-outputs"),
    path("attempts/<id:attempt_id>/outputs/<id:file_id>", node_api.OutputFileView.as_view(), name="node-output-file"),
    path(
        "attempts/<id:attempt_id>/outputs/<id:file_id>/done", node_api.OutputDoneView.as_view(), name="node-output-done"
    ),
    path("attempts/<id:attempt_id>/inputs/<id:output_id>", node_api.InputFileView.as_view(), name="node-input-file"),
]
