"""Fixed-window rate limits in Redis, for endpoints where secrets are guessed (auth, enrollment, joins)."""

from __future__ import annotations

import time

from django.conf import settings

from euler.errors import EulerError
from euler.redis import client


class RateLimited(EulerError):
    code = "rate_limited"
    status_code = 429
    message = "Too many attempts; wait and try again."


def client_ip(request) -> str:
    return request.META.get("REMOTE_ADDR", "") or "unknown"


def _key(bucket: str, who: str, window: int) -> tuple[str, int]:
    now = int(time.time())
    start = now - now % window
    return f"euler:rl:{bucket}:{who}:{start}", start + window - now


def check(bucket: str, who: str, *, limit: int, window: int) -> None:
    """Raise RateLimited (429, Retry-After) when `who` already spent `limit` in this window."""
    if limit <= 0:
        return
    key, remaining = _key(bucket, who, window)
    used = client().get(key)
    if used is not None and int(used) >= limit:
        raise RateLimited(extra={"retry_after": max(1, remaining)})


def spend(bucket: str, who: str, *, window: int) -> None:
    key, remaining = _key(bucket, who, window)
    pipe = client().pipeline(transaction=False)
    pipe.incr(key)
    pipe.expire(key, remaining + 1)
    pipe.execute()


def auth_failure_limit() -> tuple[int, int]:
    return settings.EULER_AUTH_FAILURES_PER_MINUTE, 60
