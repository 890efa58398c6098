"""Websocket authentication: the console session, or X-Euler-API-Key on the handshake.

The Origin check guards against cross-site websocket hijacking, which only threatens cookie-authenticated
browsers. A browser cannot set a custom header on a websocket handshake, so a handshake that carries
`X-Euler-API-Key` is not a browser riding on a cookie: it needs no Origin (scripts and CLIs send none).
A handshake without the header is authenticated by the session cookie and keeps the origin check.
"""

from __future__ import annotations

from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from channels.security.websocket import AllowedHostsOriginValidator

from euler.ratelimit import RateLimited, scope_ip

CLOSE_RATE_LIMITED = 4429


@database_sync_to_async
def _key_for(raw: str, who: str | None):
    """The key or None; raises RateLimited past the failed-guess limit (as the HTTP API does)."""
    from quotas.auth import apikey_authenticate_limited

    return apikey_authenticate_limited(raw=raw, who=who)


async def _refuse(receive, send, code: int) -> None:
    message = await receive()
    if message["type"] == "websocket.connect":
        await send({"type": "websocket.close", "code": code})


class ApiKeyOrSessionMiddleware:
    def __init__(self, inner):
        self.inner = AuthMiddlewareStack(inner)

    async def __call__(self, scope, receive, send):
        scope = dict(scope)
        scope["euler_project"] = None
        for name, value in scope.get("headers", []):
            if name == b"x-euler-api-key":
                try:
                    key = await _key_for(value.decode("latin-1"), scope_ip(scope))
                except RateLimited:
                    return await _refuse(receive, send, CLOSE_RATE_LIMITED)
                scope["euler_api_key"] = True
                if key is not None:
                    # The consumer re-checks the key by id while the socket is open (revoked: closed).
                    scope["euler_project"], scope["euler_api_key_id"] = key.project, key.pk
                break
        return await self.inner(scope, receive, send)


def _has_api_key(scope) -> bool:
    return any(name == b"x-euler-api-key" for name, _ in scope.get("headers", []))


class OriginCheckedUnlessApiKey:
    """Applies the allowed-hosts Origin check to cookie handshakes only (see the module docstring)."""

    def __init__(self, inner):
        self.inner = inner
        self.checked = AllowedHostsOriginValidator(inner)

    async def __call__(self, scope, receive, send):
        if _has_api_key(scope):
            return await self.inner(scope, receive, send)
        return await self.checked(scope, receive, send)


def websocket_application(inner):
    """The websocket stack: Origin check for cookie handshakes, then API key or session authentication."""
    return OriginCheckedUnlessApiKey(ApiKeyOrSessionMiddleware(inner))
