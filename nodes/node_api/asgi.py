"""The node-agent endpoints (/node-api/) without Django's middleware chain.

Django runs every sync-style middleware hook through sync_to_async, and inside a request's
ThreadSensitiveContext the first such call starts a thread of its own: under load that costs several times
what a heartbeat does. The node endpoints need none of that chain: they authenticate the node credential
themselves (no session, user, locale or messages), are CSRF-exempt (no cookies), and refuse plain HTTP
themselves. `route_node_api(app)` sends them to this handler, which keeps the request id and the audit
context (both async, no thread hop), resolves against the node URLs alone (root_urls.py), and does the two things of the rest that matter to a JSON client: a
sized body (CommonMiddleware's Content-Length) and `X-Content-Type-Options: nosniff` (SecurityMiddleware's).
"""

from __future__ import annotations

from django.core.handlers.exception import convert_exception_to_response

from audit.context import AuditContextMiddleware
from euler.observability import RequestIdMiddleware
from gateway.asgi import LeanHandler

PREFIX = "/node-api/"


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


def route_node_api(app):
    """An ASGI app that hands /node-api/ requests to NodeApiHandler and everything else to `app`."""
    lean = NodeApiHandler()

    async def router(scope, receive, send):
        if scope["type"] == "http" and scope.get("path", "").startswith(PREFIX):
            return await lean(scope, receive, send)
        return await app(scope, receive, send)

    return router
