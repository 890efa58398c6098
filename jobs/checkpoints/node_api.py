"""The node routes of checkpoints (nodeagent/protocol_checkpoints.py): the manifest's plan, blob chunks and their
offsets, a presigned upload's done call, the commit, the restore list and a blob's bytes.

Authenticated like every node route (NodeAPIView) and fenced on the attempt (jobs.fencing, Right.CHECKPOINTS)."""

from __future__ import annotations

from rest_framework.response import Response
from rest_framework.views import APIView

from jobs.checkpoints import selectors, services
from jobs.outputs.node_api import MAX_MANIFEST_BYTES, read_chunk, read_manifest, stored_bytes
from nodeagent import protocol
from nodes.node_api.base import NodeAPIView


class CheckpointsView(NodeAPIView):
    """POST /node-api/v1/attempts/{attempt_id}/checkpoints — a CheckpointManifest; answers a CheckpointPlan."""

    body_limit = MAX_MANIFEST_BYTES

    def post(self, request, attempt_id: int):
        manifest = read_manifest(request, protocol.CheckpointManifest, "checkpoint manifest")
        plan = services.plan_checkpoint(node=request.node, attempt_id=attempt_id, manifest=manifest)
        return Response(plan.model_dump())


class BlobView(NodeAPIView):
    """GET: the bytes the server holds of the blob (resume from there); PUT: one chunk (`Content-Range`)."""

    body_limit = protocol.MAX_OUTPUT_CHUNK_BYTES

    def get(self, request, attempt_id: int, blob_id: int):
        return Response(services.blob_state(node=request.node, attempt_id=attempt_id, blob_id=blob_id).model_dump())

    def put(self, request, attempt_id: int, blob_id: int):
        reply = services.receive_chunk(node=request.node, attempt_id=attempt_id, blob_id=blob_id,
                                       content_range=request.META.get("HTTP_CONTENT_RANGE"), data=read_chunk(request))  # fmt: skip
        return Response(reply.model_dump())


class BlobDoneView(NodeAPIView):
    def post(self, request, attempt_id: int, blob_id: int):
        return Response(services.blob_done(node=request.node, attempt_id=attempt_id, blob_id=blob_id).model_dump())


class CommitView(NodeAPIView):
    def post(self, request, attempt_id: int, checkpoint_id: int):
        reply = services.commit(node=request.node, attempt_id=attempt_id, checkpoint_id=checkpoint_id)
        return Response(reply.model_dump())


class RestoreView(NodeAPIView):
    def get(self, request, attempt_id: int):
        return Response(selectors.restore_for_node(node=request.node, attempt_id=attempt_id).model_dump())


class BlobDataView(NodeAPIView):
    """GET: a committed checkpoint's blob, streamed, to the node holding the job's active attempt (a restore).

    A plain sync view (not pooled), like the inputs' route: Django's handler streams the response."""

    @classmethod
    def as_view(cls, **initkwargs):
        return APIView.as_view.__func__(cls, **initkwargs)

    def get(self, request, attempt_id: int, blob_id: int):
        blob = selectors.blob_for_node(node=request.node, attempt_id=attempt_id, blob_id=blob_id)
        return stored_bytes(request, storage_key=blob.storage_key, size=blob.size, sha256=blob.sha256)
