"""The user's outputs API: list a job's outputs, download one (HTTP Range: 206, 416), or all as one tar.

Downloads stream from the store block by block (streaming.py): the web process's memory does not grow with
the file. The console links to the same URLs (session authentication)."""

from __future__ import annotations

from urllib.parse import quote

from django.http import JsonResponse, StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs.outputs import rules, selectors, store, streaming
from quotas.access import member
from quotas.api.base import request_project

BINARY = OpenApiResponse(OpenApiTypes.BINARY, description="the file's bytes")


class OutputFileOut(serializers.Serializer):
    path = serializers.CharField()
    size = serializers.IntegerField()
    sha256 = serializers.CharField()
    created_at = serializers.DateTimeField()
    attempt = serializers.IntegerField(allow_null=True)


class OutputsOut(serializers.Serializer):
    job = serializers.IntegerField()
    declared = serializers.JSONField(allow_null=True)
    outputs_truncated = serializers.BooleanField()
    outputs_reason = serializers.CharField(allow_blank=True)
    total_bytes = serializers.IntegerField()
    files = OutputFileOut(many=True)


def _disposition(name: str) -> str:
    base = name.rsplit("/", 1)[-1]
    ascii_name = base.encode("ascii", "replace").decode().replace('"', "_").replace("\\", "_")
    return f"attachment; filename=\"{ascii_name}\"; filename*=UTF-8''{quote(base)}"


class _Download(APIView):
    access = {"get": member()}

    def perform_content_negotiation(self, request, force=False):
        return super().perform_content_negotiation(request, force=True)  # bytes whatever the Accept header says


class JobOutputsView(APIView):
    access = {"get": member()}

    @extend_schema(operation_id="jobs_outputs_list", responses={200: OutputsOut})
    def get(self, request, job_id: int):
        job = selectors.project_job(project=request_project(request), job_id=job_id)
        files = [
            {
                "path": f.path,
                "size": f.size,
                "sha256": f.sha256,
                "created_at": f.completed_at or f.created_at,
                "attempt": f.attempt_id,
            }  # fmt: skip
            for f in selectors.job_files(job=job)
        ]
        return Response(OutputsOut({
            "job": job.pk,
            "declared": job.outputs,
            "outputs_truncated": job.outputs_truncated,
            "outputs_reason": job.outputs_reason,
            "total_bytes": sum(f["size"] for f in files),
            "files": files,
        }).data)  # fmt: skip


class JobOutputFileView(_Download):
    @extend_schema(
        operation_id="jobs_outputs_download",
        parameters=[OpenApiParameter("Range", str, OpenApiParameter.HEADER, description="bytes=START-END")],
        responses={200: BINARY, 206: BINARY, 416: OpenApiResponse(description="range_not_satisfiable")},
    )
    def get(self, request, job_id: int, path: str):
        job = selectors.project_job(project=request_project(request), job_id=job_id)
        row = selectors.job_file(job=job, path=path)
        try:
            wanted = rules.byte_range(request.META.get("HTTP_RANGE"), row.size)
        except rules.Unsatisfiable:
            response = JsonResponse({"code": "range_not_satisfiable", "detail": f"The file holds {row.size} bytes."},
                                    status=416)  # fmt: skip
            response["Content-Range"] = f"bytes */{row.size}"
            return response
        start, end = wanted if wanted else (0, row.size - 1)
        blocks = store.iter_range(row.storage_key, start, end) if row.size else iter(())
        response = StreamingHttpResponse(streaming.body(request, blocks), status=206 if wanted else 200,
                                         content_type="application/octet-stream")  # fmt: skip
        response["Content-Length"] = str(end - start + 1 if row.size else 0)
        if wanted:
            response["Content-Range"] = f"bytes {start}-{end}/{row.size}"
        response["Accept-Ranges"] = "bytes"
        response["ETag"] = f'"{row.sha256}"'
        response["X-Euler-Sha256"] = row.sha256
        response["Content-Disposition"] = _disposition(row.path)
        return response


class JobOutputsArchiveView(_Download):
    @extend_schema(operation_id="jobs_outputs_archive", responses={200: BINARY})
    def get(self, request, job_id: int):
        job = selectors.project_job(project=request_project(request), job_id=job_id)
        members = [
            streaming.Member(f.path, f.size, f.storage_key, (f.completed_at or f.created_at).timestamp())
            for f in selectors.job_files(job=job)
        ]
        response = StreamingHttpResponse(streaming.body(request, streaming.tar_blocks(members)),
                                         content_type="application/x-tar")  # fmt: skip
        response["Content-Length"] = str(streaming.tar_size(members))
        response["Content-Disposition"] = f'attachment; filename="job-{job.pk}-outputs.tar"'
        return response
