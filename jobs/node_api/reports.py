"""POST /node-api/v1/attempts/{id}/report: a node reports its attempt running or ended (fenced)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.response import Response

from jobs import attempts
from nodeagent import protocol
from nodes.node_api.base import NodeAPIView


class AttemptReportView(NodeAPIView):
    @extend_schema(
        operation_id="node_attempt_report",
        request={"application/json": protocol.AttemptReport.model_json_schema()},
        responses={200: OpenApiResponse(description="ReportReply"), 409: OpenApiResponse(description="stale_attempt")},
    )
    def post(self, request, attempt_id: int):
        report = self.parse(request, protocol.AttemptReport, code="invalid_report")
        reply = attempts.attempt_report(node=request.node, attempt_id=attempt_id, report=report)
        return Response(reply.model_dump())
