"""POST /node-api/v1/leaving: a stopping agent names the attempts whose containers it leaves for its next start."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.response import Response

from euler.errors import InvalidInput
from jobs import attempts
from nodeagent import protocol
from nodes.node_api.base import NodeAPIView


class LeavingView(NodeAPIView):
    @extend_schema(
        operation_id="node_leaving",
        request={"application/json": protocol.Leaving.model_json_schema()},
        responses={200: OpenApiResponse(description="LeavingReply")},
    )
    def post(self, request):
        notice = self.parse(request, protocol.Leaving, code="invalid_leaving")
        if notice.protocol_version != protocol.PROTOCOL_VERSION:
            raise InvalidInput(
                f"This server speaks node protocol {protocol.PROTOCOL_VERSION}, the agent sent "
                f"{notice.protocol_version}.",
                code="unsupported_protocol_version",
            )
        held = attempts.hold_for_restart(node=request.node, attempt_ids=notice.attempts)
        reply = protocol.LeavingReply(held=held, hold_seconds=settings.EULER_NODE_RESTART_HOLD if held else 0.0)
        return Response(reply.model_dump())
