"""Websocket authentication: the console session, or X-Euler-API-Key on the handshake."""

from __future__ import annotations

from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async


@database_sync_to_async
def _project_for_key(raw: str):
    from quotas.services import apikey_authenticate

    key = apikey_authenticate(raw=raw)
    return key.project if key else None


class ApiKeyOrSessionMiddleware:
    def __init__(self, inner):
        self.inner = AuthMiddlewareStack(inner)

    async def __call__(self, scope, receive, send):
        scope = dict(scope)
        scope["euler_project"] = None
        for name, value in scope.get("headers", []):
            if name == b"x-euler-api-key":
                scope["euler_project"] = await _project_for_key(value.decode("latin-1"))
                scope["euler_api_key"] = True
                break
        return await self.inner(scope, receive, send)
