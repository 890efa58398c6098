"""Who is calling the gateway: a project API key (cached briefly in memory) or a console session."""

from __future__ import annotations

import asyncio
import hashlib
import time

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections
from django.middleware.csrf import CsrfViewMiddleware

from euler.errors import EulerError, Forbidden, NotFound, Unauthorized
from euler.ratelimit import client_ip

_keys: dict[str, tuple[int, float]] = {}  # sha256(secret) -> (project id, looked up at)
_refreshing: dict[str, asyncio.Future] = {}
_MAX_CACHED = 10_000


def _key_project(raw: str, who: str | None = None) -> int | None:
    from quotas.auth import apikey_authenticate_limited

    close_old_connections()
    key = apikey_authenticate_limited(raw=raw, who=who)  # guesses count, and answer 429, as on the API
    return key.project_id if key else None


_akey_project = sync_to_async(_key_project, thread_sensitive=False)


def _session_project(request) -> int | None:
    from quotas.selectors import session_project

    close_old_connections()
    project = session_project(request)
    return project.pk if project else None


_asession_project = sync_to_async(_session_project, thread_sensitive=False)


async def project_id_for(request) -> int:
    """The caller's project id, or an EulerError (401/403/404) to answer with."""
    raw = request.headers.get("X-Euler-API-Key")
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
        project_id = await _lookup(raw, digest, who=client_ip(request))
        if project_id is None:
            raise Unauthorized("The API key is unknown or revoked.", code="invalid_api_key")
        return project_id
    return await _session_caller(request)


async def _lookup(raw: str, digest: str, who: str | None = None) -> int | None:
    project_id = await _akey_project(raw, who)
    if project_id is None:
        _keys.pop(digest, None)
        return None
    if len(_keys) >= _MAX_CACHED:
        _keys.clear()
    _keys[digest] = (project_id, time.monotonic())
    return project_id


async def _session_caller(request) -> int:
    if not hasattr(request, "session"):
        # The lean gateway handler runs without SessionMiddleware: load the session here.
        from importlib import import_module

        engine = import_module(settings.SESSION_ENGINE)
        request.session = engine.SessionStore(request.COOKIES.get(settings.SESSION_COOKIE_NAME))
    user = await request.auser() if hasattr(request, "auser") else await _auser(request)
    if not user.is_authenticated:
        raise Unauthorized("Send X-Euler-API-Key or sign in.", code="not_authenticated")
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


__all__ = ["EulerError", "forget_keys", "project_id_for"]
