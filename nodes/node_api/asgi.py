"""The node-agent endpoints (/node-api/) without Django's middleware chain.

Django runs every sync-style middleware hook through sync_to_async, and inside a request's
ThreadSensitiveContext the first such call starts a thread of its own: under load that costs several times
what a heartbeat does. The node endpoints need none of that chain: they authenticate the node credential
themselves (no session, user, locale or messages), are CSRF-exempt (no cookies), and refuse plain HTTP
themselves. `route_node_api(app)` sends them to this handler, which keeps the request id and the audit
context (both async, no thread hop), resolves against the node URLs alone (root_urls.py), and does the two things of the rest that matter to a JSON client: a
sized body (CommonMiddleware's Content-Length) and `X-Content-Type-Options: nosniff` (SecurityMiddleware's).

The node endpoints go one step further (`serve_hot`): no Django handler at all. Django's ASGI handler starts a
task per request to listen for the disconnect, sends the request signals (each a hop to a thread) and
resolves the URL; for a heartbeat answered from memory that was most of its cost, and at 10,000 simulated
nodes the reports and log chunks of a job burst kept the event loop too busy to accept new connections.
Here the path is resolved against the node URLs, the body is read under the view's own `body_limit` (log
batches) or DATA_UPLOAD_MAX_MEMORY_SIZE (413 past it), Django's own ASGIRequest is built from it, and the
(async, or pooled) view is awaited with the request id and the audit context set, as the chain above does.
The node views manage their own database connections (asyncdb.py), so the request signals have nothing to
close. A view marked `held` (the long poll) is raced against the client's disconnect: a poll whose agent went
away (stopped, killed, restarted) ends then, not at its own `wait`, and a stopping web process is not held by it
for its whole graceful period; the other node calls answer at once and pay for no second task. Paths that match
no node endpoint go to NodeApiHandler.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging

from asgiref.sync import iscoroutinefunction
from django.conf import settings
from django.core.handlers.asgi import ASGIRequest
from django.core.handlers.exception import convert_exception_to_response
from django.urls import Resolver404, resolve

from audit.context import AuditContextMiddleware, Caller, _caller, clean_ip
from euler.errors import json_error
from euler.observability import RequestIdMiddleware, new_request_id, request_id_var
from gateway.asgi import LeanHandler
from nodeagent import protocol, protocol_tunnel

log = logging.getLogger(__name__)

PREFIX = "/node-api/"
HOT = tuple(f"{PREFIX}v1/{path}" for path in (protocol.PATH_HEARTBEAT, protocol.PATH_POLL))  # the calls of every node


class NodeApiHandler(LeanHandler):
    def load_middleware(self, is_async: bool = False) -> None:
        super().load_middleware(is_async)
        inner = self._get_response_async

        async def finish(request):
            request.urlconf = "nodes.node_api.root_urls"  # only the node endpoints to match against
            response = await inner(request)
            if not response.streaming and not response.has_header("Content-Length"):
                response.headers["Content-Length"] = str(len(response.content))
            response.headers.setdefault("X-Content-Type-Options", "nosniff")
            return response

        chain = RequestIdMiddleware(AuditContextMiddleware(finish))
        self._middleware_chain = convert_exception_to_response(chain)


async def _body(receive, limit: int, *, keep_over: bool) -> bytes | None:
    """The request body; over `limit`: None, or (`keep_over`) its first limit + 1 bytes for the view to refuse
    in its own words. None as well when the client went away before sending it all."""
    parts, size = [], 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None  # http.disconnect
        chunk = message.get("body", b"")
        size += len(chunk)
        parts.append(chunk)
        if size > limit:
            return b"".join(parts)[: limit + 1] if keep_over else None
        if not message.get("more_body", False):
            return b"".join(parts)


async def _send(send, response, request_id: str) -> None:
    content = response.content
    headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in response.items()]
    headers += [(b"content-length", str(len(content)).encode()), (b"x-request-id", request_id.encode()),
                (b"x-content-type-options", b"nosniff")]  # fmt: skip
    await send({"type": "http.response.start", "status": response.status_code, "headers": headers})
    await send({"type": "http.response.body", "body": content})


def _limit(view) -> tuple[int, bool]:
    """The body a view takes: its class's own `body_limit` (the view refuses more itself), else Django's."""
    own = getattr(getattr(view, "view_class", None), "body_limit", None)
    if own:
        return own, True
    return settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 2**31, False


async def serve_hot(scope, receive, send, view, kwargs=None) -> None:
    """A node endpoint without Django's handler (see the module's docstring)."""
    request_id = new_request_id(dict(scope.get("headers") or ()).get(b"x-request-id", b"").decode("latin-1"))
    limit, keep_over = _limit(view)
    body = await _body(receive, limit, keep_over=keep_over)
    if body is None:
        response = json_error("request_too_large", f"A request body is at most {limit} bytes.", 413)
        return await _send(send, response, request_id)
    request = ASGIRequest(scope, io.BytesIO(body))
    rid = request_id_var.set(request_id)
    caller = _caller.set(Caller(ip=clean_ip(request.META.get("REMOTE_ADDR")), request=request))
    try:
        request.request_id = request_id
        if getattr(view, "held", False):  # set on the long poll (nodes/node_api/views.py)
            response = await _unless_gone(receive, view(request, **(kwargs or {})))
            if response is None:
                return  # nobody to answer
        else:
            response = await view(request, **(kwargs or {}))
    except Exception:
        log.exception("node endpoint %s failed", scope.get("path"))
        response = json_error("server_error", "Internal error; it has been logged.", 500)
    finally:
        _caller.reset(caller)
        request_id_var.reset(rid)
    await _send(send, response, request_id)


async def _gone(receive) -> None:
    """Returns once the client has disconnected (the body is read: ASGI servers answer `receive` then)."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def _unless_gone(receive, answer):
    """The view's answer, or None once the client disconnected first (the view is cancelled: it is told nothing
    more than a client that stopped listening; its waiter and its subscription end with it)."""
    work = asyncio.ensure_future(answer)
    gone = asyncio.ensure_future(_gone(receive))
    try:
        await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (work, gone):
            if not task.done():
                task.cancel()
    if work.cancelled() or not work.done():
        with contextlib.suppress(asyncio.CancelledError):
            await work
        return None
    return work.result()


ROOT_URLCONF = "nodes.node_api.root_urls"


def _hot_view(path: str):
    """(view, kwargs) of an async node endpoint at `path`, or None (not found: Django's handler answers)."""
    try:
        match = resolve(path, urlconf=ROOT_URLCONF)
    except Resolver404:
        return None
    if not iscoroutinefunction(match.func):
        return None
    return match.func, match.kwargs


def route_node_api(app):
    """An ASGI app that serves the node endpoints itself (serve_hot), hands other /node-api/ paths (not found)
    to NodeApiHandler and everything else to `app`."""
    lean = NodeApiHandler()

    async def router(scope, receive, send):
        if scope["type"] == "http":
            path = scope.get("path", "")
            if path.startswith(PREFIX):
                found = _hot_view(path)
                if found is not None:
                    return await serve_hot(scope, receive, send, *found)
                return await lean(scope, receive, send)
        return await app(scope, receive, send)

    return router


TUNNEL_PATH = f"{PREFIX}v1/{protocol_tunnel.PATH_TUNNEL}"


def route_node_tunnel(tunnel, app):
    """A websocket ASGI app that hands the node tunnel's path to `tunnel` (jobs/tunnel.py) and the rest to `app`."""

    async def router(scope, receive, send):
        if scope["type"] == "websocket" and scope.get("path", "").rstrip("/") == TUNNEL_PATH:
            return await tunnel(scope, receive, send)
        return await app(scope, receive, send)

    return router
