from django.urls import path

from jobs.checkpoints import node_api

urlpatterns = [
    path("attempts/<id:attempt_id>/checkpoints", node_api.CheckpointsView.as_view(), name="node-checkpoints"),
    path(
        "attempts/<id:attempt_id>/checkpoints/restore", node_api.RestoreView.as_view(), name="node-checkpoint-restore"
    ),
    path("attempts/<id:attempt_id>/checkpoints/blobs/<id:blob_id>", node_api.BlobView.as_view(), name="node-ckpt-blob"),
    path(
        "attempts/<id:attempt_id>/checkpoints/blobs/<id:blob_id>/done",
        node_api.BlobDoneView.as_view(),
        name="node-ckpt-blob-done",
    ),
    path(
        "attempts/<id:attempt_id>/checkpoints/blobs/<id:blob_id>/data",
        node_api.BlobDataView.as_view(),
        name="node-ckpt-blob-data",
    ),
    path(
        "attempts/<id:attempt_id>/checkpoints/<id:checkpoint_id>/commit",
        node_api.CommitView.as_view(),
        name="node-checkpoint-commit",
    ),
]
