"""A lean ASGI entry for invoke calls: Django's handler without the middleware chain.

Django runs each sync-style middleware hook (process_request/process_response) through
sync_to_async: about a dozen thread hops per request with the project's middleware list, more
than the whole proxy costs. The invoke view needs none of them (it authenticates itself, is
CSRF-exempt for API keys and checks CSRF itself for sessions, and sets its own request id), so
`route_invoke(app)` sends /api/v1/agents/<name>/invoke... to this handler and everything else to `app`.
"""

from __future__ import annotations

import re

from django.conf import settings
from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.exception import convert_exception_to_response

INVOKE_PATH = re.compile(r"^/api/v1/agents/[^/]+/invoke(/|$)")


class LeanHandler(ASGIHandler):
    async def __call__(self, scope, receive, send):
        # No ThreadSensitiveContext: inside one, asgiref starts a fresh thread per request for the
        # first sync_to_async call (Django's request signals), which costs as much as the rest of
        # the request. Without it those few short calls share asgiref's one sync thread.
        await self.handle(scope, bounded_receive(scope, receive, settings.EULER_GATEWAY_MAX_BODY_BYTES), send)

    def load_middleware(self, is_async: bool = False) -> None:
        self._view_middleware = []
        self._template_response_middleware = []
        self._exception_middleware = []
        self._middleware_chain = convert_exception_to_response(self._get_response_async)


BODY_TOO_LARGE = "euler.body_too_large"  # read by gateway.proxy, which answers 413 body_too_large


def bounded_receive(scope, receive, limit: int):
    """`receive` that ends the body early, and flags the scope, once it passes `limit` bytes.

    Django reads the whole body into a temporary file before the view runs; without this, a
    gigabyte upload would be spooled to disk before the view could refuse it. A Content-Length
    over the limit is refused without reading a byte; a chunked body is counted as it arrives.
    """
    declared = next((v for k, v in scope.get("headers", ()) if k.lower() == b"content-length"), None)
    if declared is not None and declared.strip().isdigit() and int(declared) > limit:
        scope[BODY_TOO_LARGE] = True
    seen = 0
    ended = False

    async def bounded():
        nonlocal seen, ended
        if scope.get(BODY_TOO_LARGE):
            if not ended:
                ended = True
                return {"type": "http.request", "body": b"", "more_body": False}
            # Django listens for the disconnect after the body: discard what the client still sends.
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    return message
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > limit:
                scope[BODY_TOO_LARGE] = True
                ended = True
                return {"type": "http.request", "body": b"", "more_body": False}
        return message

    return bounded


def route_invoke(app):
    """An ASGI app that hands invoke paths to LeanHandler and everything else to `app`."""
    lean = LeanHandler()

    async def router(scope, receive, send):
        if scope["type"] == "http" and INVOKE_PATH.match(scope.get("path", "")):
            return await lean(scope, receive, send)
        return await app(scope, receive, send)

    return router
