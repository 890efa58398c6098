"""Who is calling the gateway: a project API key (cached briefly in memory) or a console session.

The key comes as `X-Euler-API-Key`, or as `Authorization: Bearer euler_pk_…` where OpenAI-style
SDKs put their `api_key` (as LiteLLM takes its keys). A bearer token that is not an Euler key is
the upstream's business and passes through.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from dataclasses import dataclass

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections
from django.middleware.csrf import CsrfViewMiddleware

from euler.errors import EulerError, Forbidden, NotFound, Unauthorized
from euler.ratelimit import client_ip

KEY_PREFIX = "euler_pk_"


@dataclass(frozen=True)
class Caller:
    project_id: int
    key_id: int | None = None  # None: a console session
    rpm_limit: int | None = None

    @property
    def by_session(self) -> bool:
        return self.key_id is None


_keys: dict[str, tuple[Caller, float]] = {}  # sha256(secret) -> (caller, looked up at)
_refreshing: dict[str, asyncio.Future] = {}
_MAX_CACHED = 10_000


def bearer_key(request) -> str | None:
    """The Euler key sent as `Authorization: Bearer euler_pk_…`, else None (other tokens are the upstream's)."""
    scheme, _, token = request.headers.get("Authorization", "").strip().partition(" ")
    token = token.strip()
    if scheme.lower() == "bearer" and token.startswith(KEY_PREFIX):
        return token
    return None


def _key_caller(raw: str, who: str | None = None) -> Caller | None:
    from quotas.auth import apikey_authenticate_limited

    close_old_connections()
    key = apikey_authenticate_limited(raw=raw, who=who)  # guesses count, and answer 429, as on the API
    return Caller(key.project_id, key.pk, key.rpm_limit) if key else None


_akey_caller = sync_to_async(_key_caller, thread_sensitive=False)


def _session_project(request) -> int | None:
    from quotas.selectors import session_project

    close_old_connections()
    project = session_project(request)
    return project.pk if project else None


_asession_project = sync_to_async(_session_project, thread_sensitive=False)


async def caller_for(request) -> Caller:
    """The caller (project, key), or an EulerError (401/403/404) to answer with."""
    raw = request.headers.get("X-Euler-API-Key")
    if raw is None:
        raw = bearer_key(request)
    if raw is not None:
        raw = raw.strip()
        digest = hashlib.sha256(raw.encode()).hexdigest()
        cached = _keys.get(digest)
        if cached is not None:
            age = time.monotonic() - cached[1]
            ttl = settings.EULER_GATEWAY_KEY_CACHE_TTL
            if age < ttl:
                return cached[0]
            if age < 2 * ttl:
                # Still trusted for a moment while one background lookup refreshes it: a revoked
                # key stops within twice the TTL, and no call waits on the database meanwhile.
                if digest not in _refreshing:
                    _refreshing[digest] = task = asyncio.ensure_future(_lookup(raw, digest))
                    task.add_done_callback(lambda _t: _refreshing.pop(digest, None))
                return cached[0]
        caller = await _lookup(raw, digest, who=client_ip(request))
        if caller is None:
            raise Unauthorized("The API key is unknown or revoked.", code="invalid_api_key")
        return caller
    return Caller(await _session_caller(request))


async def project_id_for(request) -> int:
    return (await caller_for(request)).project_id


async def _lookup(raw: str, digest: str, who: str | None = None) -> Caller | None:
    caller = await _akey_caller(raw, who)
    if caller is None:
        _keys.pop(digest, None)
        return None
    if len(_keys) >= _MAX_CACHED:
        _keys.clear()
    _keys[digest] = (caller, time.monotonic())
    return caller


async def _session_caller(request) -> int:
    if not hasattr(request, "session"):
        # The lean gateway handler runs without SessionMiddleware: load the session here.
        from importlib import import_module

        engine = import_module(settings.SESSION_ENGINE)
        request.session = engine.SessionStore(request.COOKIES.get(settings.SESSION_COOKIE_NAME))
    user = await request.auser() if hasattr(request, "auser") else await _auser(request)
    if not user.is_authenticated:
        raise Unauthorized(
            "Send X-Euler-API-Key (or Authorization: Bearer euler_pk_…) or sign in.", code="not_authenticated"
        )
    if request.method not in ("GET", "HEAD", "OPTIONS", "TRACE"):
        # A session caller is a browser: unsafe methods need the CSRF token like any console form.
        rejected = CsrfViewMiddleware(lambda r: None).process_view(request, None, (), {})
        if rejected is not None:
            raise Forbidden("CSRF verification failed.", code="csrf_failed")
    project_id = await _asession_project(request)
    if project_id is None:
        raise NotFound("You are not a member of any project.", code="no_project")
    return project_id


async def _auser(request):
    from django.contrib.auth import aget_user

    request.user = await aget_user(request)
    return request.user


def forget_keys() -> None:
    _keys.clear()
    _refreshing.clear()


__all__ = ["Caller", "EulerError", "bearer_key", "caller_for", "forget_keys", "project_id_for"]
