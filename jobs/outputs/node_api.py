"""The node routes of outputs and inputs (nodeagent/protocol.py, "Outputs (issue 24)"): the manifest's plan, chunk
uploads and their offsets, the done call of a presigned PUT, and an input file for the node that holds the attempt.

They authenticate like every node route (NodeAPIView: the node credential, HTTPS) and answer only for the
current attempt of a job, on the node that holds it, while that attempt is active: once its `ended` report was
accepted they answer 409 `stale_attempt` and change nothing (jobs.fencing)."""

from __future__ import annotations

import json

import pydantic
from django.http import StreamingHttpResponse
from rest_framework.response import Response
from rest_framework.views import APIView

from euler.errors import InvalidInput
from jobs.outputs import selectors, services, store, streaming
from nodeagent import protocol
from nodes.node_api.base import NodeAPIView, _describe

# A manifest lists at most MAX_OUTPUT_FILES files and MAX_OUTPUT_SKIPPED_LISTED skips of MAX_OUTPUT_PATH_CHARS each.
MAX_MANIFEST_BYTES = 16 * 1024 * 1024


def _read(request, limit: int, too_large: Exception) -> bytes:
    """The raw body under `limit` (not DATA_UPLOAD_MAX_MEMORY_SIZE), or `too_large` (413)."""
    length = request.META.get("CONTENT_LENGTH") or "0"
    if length.isdigit() and int(length) > limit:
        raise too_large
    body = request._request.read(limit + 1)
    if len(body) > limit:
        raise too_large
    return body


def read_manifest(request, model: type[pydantic.BaseModel], what: str):
    """The body (at most MAX_MANIFEST_BYTES: else 413 `manifest_too_large`) as `model`, or 400 `invalid_manifest`
    saying what is wrong with `what`: outputs' and checkpoints' manifests alike."""
    too_large = services.ChunkTooLarge(f"A manifest is at most {MAX_MANIFEST_BYTES} bytes.", code="manifest_too_large")
    body = _read(request, MAX_MANIFEST_BYTES, too_large)
    try:
        return model.model_validate(json.loads(body or b"null"))
    except (ValueError, pydantic.ValidationError) as exc:
        detail = _describe(exc) if isinstance(exc, pydantic.ValidationError) else f"not JSON: {exc}"
        raise InvalidInput(f"The {what} is not valid: {detail}", code="invalid_manifest") from None


def read_chunk(request) -> bytes:
    """One upload chunk's bytes (at most MAX_OUTPUT_CHUNK_BYTES, else 413)."""
    limit = protocol.MAX_OUTPUT_CHUNK_BYTES
    return _read(request, limit, services.ChunkTooLarge(f"A chunk is at most {limit} bytes."))


def stored_bytes(request, *, storage_key: str, size: int, sha256: str) -> StreamingHttpResponse:
    """A stored object's bytes, streamed to a node (an input file, a checkpoint's blob for a restore)."""
    blocks = streaming.body(request, store.iter_range(storage_key, 0, None) if size else iter(()))
    response = StreamingHttpResponse(blocks, content_type="application/octet-stream")
    response["Content-Length"] = str(size)
    response["X-Euler-Sha256"] = sha256
    return response


class ManifestView(NodeAPIView):
    """POST /node-api/v1/attempts/{attempt_id}/outputs — an OutputManifest; answers an OutputsPlan."""

    body_limit = MAX_MANIFEST_BYTES

    def post(self, request, attempt_id: int):
        manifest = read_manifest(request, protocol.OutputManifest, "manifest")
        plan = services.plan_manifest(node=request.node, attempt_id=attempt_id, manifest=manifest)
        return Response(plan.model_dump())


class OutputFileView(NodeAPIView):
    """GET: the bytes the server holds of the file (resume from there); PUT: one chunk (`Content-Range`)."""

    body_limit = protocol.MAX_OUTPUT_CHUNK_BYTES

    def get(self, request, attempt_id: int, file_id: int):
        reply = services.file_state(node=request.node, attempt_id=attempt_id, file_id=file_id)
        return Response(reply.model_dump())

    def put(self, request, attempt_id: int, file_id: int):
        reply = services.receive_chunk(node=request.node, attempt_id=attempt_id, file_id=file_id,
                                       content_range=request.META.get("HTTP_CONTENT_RANGE"), data=read_chunk(request))  # fmt: skip
        return Response(reply.model_dump())


class OutputDoneView(NodeAPIView):
    """POST: a presigned PUT of this file finished; the server checks the object and marks the file complete."""

    def post(self, request, attempt_id: int, file_id: int):
        reply = services.upload_done(node=request.node, attempt_id=attempt_id, file_id=file_id)
        return Response(reply.model_dump())


class InputFileView(NodeAPIView):
    """GET: an input file's bytes, streamed, to the node holding an attempt whose job names it in `inputs_from`.

    A plain sync view (not pooled): Django's handler streams the response, the node fast path does not."""

    @classmethod
    def as_view(cls, **initkwargs):
        return APIView.as_view.__func__(cls, **initkwargs)

    def get(self, request, attempt_id: int, output_id: int):
        row = selectors.input_for_node(node=request.node, attempt_id=attempt_id, output_id=output_id)
        return stored_bytes(request, storage_key=row.storage_key, size=row.size, sha256=row.sha256)
