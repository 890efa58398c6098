"""Node-agent endpoints: enroll, heartbeat, credential rotation, and the assignment long-poll."""

from __future__ import annotations

import asyncio
import json

import pydantic
from asgiref.sync import sync_to_async
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import permissions, status
from rest_framework.response import Response

from euler.errors import EulerError, InvalidInput, json_error
from nodeagent import protocol
from nodes import channel, liveness, services
from nodes.auth import bearer, node_for_credential
from nodes.models import Approval, Node
from nodes.node_api.base import NodeAPIView, https_ok


def _check_version(version: int) -> None:
    if version != protocol.PROTOCOL_VERSION:
        raise InvalidInput(
            f"This server speaks node protocol {protocol.PROTOCOL_VERSION}, the agent sent {version}.",
            code="unsupported_protocol_version",
        )


class EnrollView(NodeAPIView):
    """The one endpoint without a node credential: the body carries the one-time enrollment token."""

    authentication_classes: list = []
    permission_classes = [permissions.AllowAny]

    def post(self, request):
        req = self.parse(request, protocol.EnrollRequest, code="invalid_enrollment")
        _check_version(req.protocol_version)
        node, secret = services.node_enroll(req=req)
        reply = protocol.EnrollResponse(
            node_id=node.pk,
            name=node.name,
            credential=secret,
            approval=node.approval,
            heartbeat_interval=liveness.next_interval(),
        )
        return Response(reply.model_dump(mode="json"), status=status.HTTP_201_CREATED)


class HeartbeatView(NodeAPIView):
    def post(self, request):
        hb = self.parse(request, protocol.Heartbeat, code="invalid_heartbeat")
        _check_version(hb.protocol_version)
        reply = liveness.node_heartbeat(node=request.node, hb=hb)
        return Response(reply.model_dump(mode="json"))


class RotateCredentialView(NodeAPIView):
    """The agent asks for a new credential; the old one stops working once this answers."""

    def post(self, request):
        _, secret = services.node_rotate_credential(node=request.node)
        return Response({"credential": secret})


def _error(exc: EulerError) -> JsonResponse:
    return json_error(exc.code, exc.message, exc.status_code, **exc.extra)


def _work_for(node_id: int, node: Node | None):
    """The providers' work for the node, read fresh after a wake-up (approval may have changed)."""
    if node is None:
        node = Node.objects.filter(pk=node_id).first()
    if node is None or node.approval != Approval.APPROVED:
        return [], []
    return channel.poll_work(node)


@csrf_exempt
async def poll(request: HttpRequest) -> JsonResponse:
    """Long-poll: answers at once when the providers have work or commands for this node, else waits for
    a wake-up (Redis) up to `wait` seconds and asks again. Async, so a held poll costs no thread."""
    if request.method != "POST":
        return json_error("method_not_allowed", "Use POST.", 405)
    if not https_ok(request):
        return json_error("https_required", "Node endpoints require HTTPS.", 403)
    raw = bearer(request.headers.get("Authorization"))
    if raw is None:
        return json_error("no_credential", "Send the node credential as 'Authorization: Bearer euler_node_…'.", 401)
    node = await sync_to_async(node_for_credential)(raw)
    if node is None:
        return json_error("invalid_node_credential", "The node credential is unknown or revoked.", 401)
    if node.approval == Approval.REJECTED:
        return json_error("node_rejected", "This node was rejected by an operator.", 401)
    try:
        body = json.loads(request.body or b"{}")
        if not isinstance(body, dict):
            raise ValueError("not an object")
        req = protocol.PollRequest.model_validate(body)
    except (ValueError, pydantic.ValidationError) as exc:
        return json_error("invalid_poll", f"Malformed poll request: {str(exc).splitlines()[0]}", 400)

    loop = asyncio.get_running_loop()
    deadline = loop.time() + req.wait
    try:
        async with channel.Waiter(node.pk) as waiter:
            assignments, commands = await sync_to_async(_work_for)(node.pk, node)
            while not (assignments or commands):
                remaining = deadline - loop.time()
                if remaining <= 0 or not await waiter.wait(remaining):
                    break
                assignments, commands = await sync_to_async(_work_for)(node.pk, None)
    except EulerError as exc:
        return _error(exc)
    reply = protocol.PollReply(assignments=assignments, commands=commands)
    return JsonResponse(reply.model_dump(mode="json"))
