"""Node-agent endpoints: enroll, heartbeat, credential rotation, and the assignment long-poll.

Heartbeat and poll are the hot paths: async views without DRF, their database work on a bounded pool
(asyncdb.py); a held poll costs no thread.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import math
import time

import pydantic
from django.core.handlers.wsgi import WSGIRequest
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import permissions, status
from rest_framework.response import Response

from euler import metrics, ratelimit
from euler.errors import Conflict, EulerError, InvalidInput, Unauthorized, error_response, json_error
from nodeagent import protocol
from nodes import channel, liveness, quickbeat, services, webload
from nodes.asyncdb import run_db, run_light
from nodes.auth import authenticate_node, bearer
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
        limit, window = ratelimit.auth_failure_limit()
        who = ratelimit.client_ip(request)
        ratelimit.check("enroll", who, limit=limit, window=window)
        req = self.parse(request, protocol.EnrollRequest, code="invalid_enrollment")
        _check_version(req.protocol_version)
        try:
            node, secret = services.node_enroll(req=req)
        except Unauthorized:
            ratelimit.spend("enroll", who, window=window)  # a guessed or replayed token
            raise
        liveness.enrolled(node, req)
        reply = protocol.EnrollResponse(
            node_id=node.pk,
            name=node.name,
            credential=secret,
            approval=node.approval,
            heartbeat_interval=liveness.next_interval(),
        )
        return Response(reply.model_dump(mode="json"), status=status.HTTP_201_CREATED)


class RotateCredentialView(NodeAPIView):
    """The agent asks for a new credential; the old one stops working once this answers."""

    def post(self, request):
        _, secret = services.node_rotate_credential(node=request.node)
        return Response({"credential": secret})


class ReclaimView(NodeAPIView):
    """`euler-node reclaim [--grace S]` on the host: the node takes itself back (nodes/reclaim.py)."""

    def post(self, request):
        from nodes import reclaim

        body = request.data if isinstance(request.data, dict) else {}
        if set(body) - {"grace"}:
            raise InvalidInput("A reclaim takes only `grace`.", code="unknown_field")
        node = request.node
        state = reclaim.node_reclaim(
            node=node, authority=reclaim.NODE, grace=body.get("grace"), actor=f"node:{node.name}"
        )
        return Response(reclaim.wire(state))


class ResumeView(NodeAPIView):
    """`euler-node resume` on the host: lifts the node's own reclaim, never its lender's or the operator's."""

    def post(self, request):
        from nodes import reclaim

        state = reclaim.node_resume(node=request.node, authority=reclaim.NODE, actor=f"node:{request.node.name}")
        return Response(reclaim.wire(state))


class TermsView(NodeAPIView):
    """The lender's terms from the agent's configuration (EULER_NODE_TERMS): the same body and checks as
    `PUT /api/v1/lending/{name}/terms`, for an approved node (its approved capacity bounds the caps)."""

    def put(self, request):
        from lending.terms import terms_dict, terms_set

        node = request.node
        if node.approval != "approved":
            raise Conflict(f"Terms apply to an approved node; this one is {node.approval}.", code="node_not_approved")
        body = request.data
        if not isinstance(body, dict):
            raise InvalidInput("The terms are a JSON object.", code="invalid_terms")
        terms_set(node=node, data=body, by=None, actor=f"node:{node.name}")
        node.refresh_from_db(fields=["lender_terms"])
        return Response({"node": node.name, "terms": terms_dict(node)})


# --- the hot paths -----------------------------------------------------------------------------
def _refuse(request: HttpRequest) -> JsonResponse | None:
    if request.method != "POST":
        return json_error("method_not_allowed", "Use POST.", 405)
    if not https_ok(request):
        return json_error("https_required", "Node endpoints require HTTPS.", 403)
    return None


def _parse(model: type[pydantic.BaseModel], body: bytes, code: str):
    try:
        return model.model_validate_json(body or b"{}")
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise InvalidInput(f"{where}: {first['msg']}", code=code) from None


def _parser(body: bytes):
    def parse() -> protocol.Heartbeat:
        hb = _parse(protocol.Heartbeat, body, "invalid_heartbeat")
        _check_version(hb.protocol_version)
        return hb

    return parse


def _verify(raw: str | None, body: bytes, who: str, arrived: float) -> dict:
    """The heartbeats memory cannot answer: the Redis round trip, then the database when needed, on the
    heartbeat threads (never queued behind polls and reports on the database threads: liveness comes first)."""
    webload.waited(time.monotonic() - arrived)  # heard this late: the overload guard counts it
    metrics.inc("euler_heartbeats_verified_total")
    parse = _parser(body)
    found = liveness.fast_heartbeat(raw=raw, parse=parse)
    return liveness.finish_heartbeat(raw=raw, found=found, parse=parse, who=who).model_dump(mode="json")


@csrf_exempt
async def heartbeat(request: HttpRequest) -> JsonResponse:
    """The hot path. Under ASGI, a node this process knows that reports nothing new is answered on the event
    loop from memory, its Redis writes batched (quickbeat.py). Otherwise one Redis round trip on the
    heartbeat threads verifies the cached row, and what needs the database (a change, the hooks, a node not
    cached) continues on those threads: never queued behind the polls and reports (liveness.py)."""
    refused = _refuse(request)
    if refused is not None:
        return refused
    webload.beat()
    try:
        raw = bearer(request.headers.get("Authorization"))
        loop = None
        if not isinstance(request, WSGIRequest):  # under ASGI: the invalidation subscription makes the cache current
            channel.ensure_listener()
            webload.ensure_monitor()
            loop = asyncio.get_running_loop()
        quick = quickbeat.heartbeat(raw=raw, body=request.body, parse=_parser(request.body), loop=loop)
        if quick is not None:
            metrics.inc("euler_heartbeats_total")
            return JsonResponse(quick)
        reply = await run_light(request, _verify, raw, request.body, ratelimit.client_ip(request), time.monotonic())
    except EulerError as exc:
        return error_response(exc)
    metrics.inc("euler_heartbeats_total")
    return JsonResponse(reply)


def _work_for(node_id: int, node: Node | None) -> channel.Work:
    """The providers' work for the node, read fresh after a wake-up (approval may have changed)."""
    if node is None:
        node = Node.objects.filter(pk=node_id).first()
    if node is None:
        return channel.Work([], [])
    if node.approval != Approval.APPROVED:
        # Nothing while pending: the approval's invalidation ends this, and work placed later wakes the node.
        return channel.Work([], [], quiet_until=math.inf)
    return channel.poll_work(node)


@csrf_exempt
async def poll(request: HttpRequest) -> JsonResponse:
    """Long-poll: answers at once when the providers have work or commands for this node, else waits for
    a wake-up (Redis) up to `wait` seconds and asks again. A node whose previous poll found nothing, and
    that nothing has woken since, is not asked about again: an idle poll costs no database work."""
    refused = _refuse(request)
    if refused is not None:
        return refused
    raw = bearer(request.headers.get("Authorization"))
    loop = asyncio.get_running_loop()
    try:
        # A node this process knows (and whose row changes it hears of) needs no database to authenticate.
        serving = loop if not isinstance(request, WSGIRequest) else None
        node = quickbeat.known_node(raw, serving)
        node = copy.copy(node) if node is not None else None
        if node is None:
            node = await run_db(request, functools.partial(authenticate_node, raw, who=ratelimit.client_ip(request)))
        req = _parse(protocol.PollRequest, request.body, "invalid_poll")
        deadline = loop.time() + req.wait
        # The waiter is registered before the providers are first asked: no wake-up falls in between.
        node_id = node.pk
        async with channel.Waiter(node_id) as waiter:
            # Nothing for it at its last poll and no wake-up since: wait without asking the providers again.
            assignments, commands = [], []
            if not waiter.quiet():
                work = await run_db(request, _work_for, node_id, node)
                waiter.asked(work)
                assignments, commands = work
            node = None  # a held poll keeps no row, only the id
            while not (assignments or commands):
                remaining = deadline - loop.time()
                if remaining <= 0 or not await waiter.wait(remaining):
                    break
                cached = quickbeat.known_id(node_id, serving)  # current while the subscription holds
                work = await run_db(request, _work_for, node_id, copy.copy(cached) if cached is not None else None)
                waiter.asked(work)
                assignments, commands = work
    except EulerError as exc:
        return error_response(exc)
    return JsonResponse(protocol.PollReply(assignments=assignments, commands=commands).model_dump(mode="json"))


poll.held = True  # served until its agent disconnects, not only to its `wait` (nodes/node_api/asgi.py: serve_hot)
