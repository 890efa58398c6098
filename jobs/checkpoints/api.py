"""The user's checkpoints API: list a job's committed checkpoints, download one (or the latest) as a tar.

The tar streams from the store block by block (jobs/outputs/streaming.py), as the outputs' archive does."""

from __future__ import annotations

from django.http import StreamingHttpResponse
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs.checkpoints import selectors
from jobs.outputs import streaming
from jobs.outputs.api import BINARY, _Download
from quotas import scoped
from quotas.access import member
from quotas.api.base import request_project


class CheckpointOut(serializers.Serializer):
    seq = serializers.IntegerField()
    attempt = serializers.IntegerField(source="attempt_number")
    reason = serializers.CharField()
    created_at = serializers.DateTimeField(source="committed_at")
    size = serializers.IntegerField()
    files = serializers.IntegerField(source="files_count")
    skipped = serializers.IntegerField()


class RefusalOut(serializers.Serializer):
    message = serializers.CharField()
    at = serializers.DateTimeField(source="created_at")


class CheckpointsOut(serializers.Serializer):
    job = serializers.IntegerField()
    declared = serializers.JSONField(allow_null=True)
    last_refusal = RefusalOut(allow_null=True)
    checkpoints = CheckpointOut(many=True)


class JobCheckpointsView(APIView):
    access = {"get": member()}

    @extend_schema(operation_id="jobs_checkpoints_list", responses={200: CheckpointsOut})
    def get(self, request, job_id: int):
        job = scoped.job(project=request_project(request), job_id=job_id)
        return Response(CheckpointsOut({
            "job": job.pk,
            "declared": job.checkpoint,
            "last_refusal": selectors.last_refusal(job=job),
            "checkpoints": list(selectors.job_checkpoints(job=job)),
        }).data)  # fmt: skip


class JobCheckpointDownloadView(_Download):
    @extend_schema(operation_id="jobs_checkpoints_download", responses={200: BINARY})
    def get(self, request, job_id: int, which: str):
        job = scoped.job(project=request_project(request), job_id=job_id)
        checkpoint = selectors.job_checkpoint(job=job, which=which)
        blobs = selectors.blobs_of(checkpoint=checkpoint)
        mtime = checkpoint.committed_at.timestamp()
        members = [streaming.Member(f["path"], f["size"], blobs[f["sha256"]].storage_key, mtime)
                   for f in checkpoint.files]  # fmt: skip
        response = StreamingHttpResponse(streaming.body(request, streaming.tar_blocks(members)),
                                         content_type="application/x-tar")  # fmt: skip
        response["Content-Length"] = str(streaming.tar_size(members))
        response["Content-Disposition"] = f'attachment; filename="job-{job.pk}-checkpoint-{checkpoint.seq}.tar"'
        response["X-Euler-Checkpoint"] = str(checkpoint.seq)
        return response
