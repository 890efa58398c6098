"""The node hot paths (heartbeat, poll) without Django's middleware chain.

Django runs every sync-style middleware hook through sync_to_async, and inside a request's
ThreadSensitiveContext the first such call starts a thread of its own: under load that costs more than a
heartbeat does. The two node hot paths need none of the chain (they are CSRF-exempt, authenticate the node
credential themselves, refuse plain HTTP themselves, and use no session, user, locale or messages), so
`route_node_hot(app)` sends them to this handler, which keeps only the request id (and
sends a Content-Length, as CommonMiddleware would).
"""

from __future__ import annotations

from django.core.handlers.exception import convert_exception_to_response

from euler.observability import RequestIdMiddleware
from gateway.asgi import LeanHandler
from nodeagent import protocol

HOT_PATHS = frozenset(f"/node-api/v1/{p}" for p in (protocol.PATH_HEARTBEAT, protocol.PATH_POLL))


class NodeHotHandler(LeanHandler):
    def load_middleware(self, is_async: bool = False) -> None:
        super().load_middleware(is_async)
        inner = self._get_response_async

        async def with_length(request):
            # CommonMiddleware's one job that matters here: a sized body, not a chunked one.
            response = await inner(request)
            if not response.streaming and not response.has_header("Content-Length"):
                response.headers["Content-Length"] = str(len(response.content))
            return response

        self._middleware_chain = convert_exception_to_response(RequestIdMiddleware(with_length))


def route_node_hot(app):
    """An ASGI app that hands the node heartbeat and poll to NodeHotHandler and everything else to `app`."""
    hot = NodeHotHandler()

    async def router(scope, receive, send):
        if scope["type"] == "http" and scope.get("path", "").rstrip("/") in HOT_PATHS:
            return await hot(scope, receive, send)
        return await app(scope, receive, send)

    return router
