"""Fixed-window rate limits in Redis, for endpoints where secrets are guessed (auth, enrollment, joins),
and the client's address as seen through trusted proxies only."""

from __future__ import annotations

import ipaddress
import time
from functools import lru_cache

from django.conf import settings

from euler.errors import EulerError
from euler.redis import client


class RateLimited(EulerError):
    code = "rate_limited"
    status_code = 429
    message = "Too many attempts; wait and try again."


@lru_cache(maxsize=8)
def _networks(cidrs: tuple[str, ...]) -> tuple:
    return tuple(ipaddress.ip_network(c, strict=False) for c in cidrs)


def _trusted(address: str) -> bool:
    networks = _networks(tuple(settings.EULER_TRUSTED_PROXIES))
    if not networks:
        return False
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in net for net in networks)


def address_behind_proxies(remote: str, forwarded: str | None) -> str:
    """The client's address: REMOTE_ADDR, unless it is a trusted proxy (EULER_TRUSTED_PROXIES); then the
    rightmost address in X-Forwarded-For that is not itself a trusted proxy. Anyone can write the header,
    so only what trusted proxies appended counts."""
    remote = (remote or "").strip() or "unknown"
    if not forwarded or not _trusted(remote):
        return remote
    hops = [hop.strip() for hop in forwarded.split(",") if hop.strip()]
    for hop in reversed(hops):
        try:
            ipaddress.ip_address(hop)
        except ValueError:
            return remote  # a mangled chain: trust nothing past the proxy we know
        if not _trusted(hop):
            return hop
    return hops[0] if hops else remote


def client_ip(request) -> str:
    return address_behind_proxies(request.META.get("REMOTE_ADDR", ""), request.META.get("HTTP_X_FORWARDED_FOR"))


def scope_ip(scope) -> str:
    """client_ip for an ASGI scope (websockets)."""
    remote = (scope.get("client") or ("", 0))[0] or ""
    forwarded = None
    for name, value in scope.get("headers", []):
        if name == b"x-forwarded-for":
            forwarded = value.decode("latin-1")
    return address_behind_proxies(remote, forwarded)


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


def spend_all(spends: list[tuple[str, str, int]], *, window: int) -> None:
    """Count one failure in each (bucket, who, limit) in one round trip; RateLimited if any is now past its limit."""
    pipe = client().pipeline(transaction=False)
    keys = []
    for bucket, who, _limit in spends:
        key, remaining = _key(bucket, who, window)
        keys.append(remaining)
        pipe.incr(key)
        pipe.expire(key, remaining + 1)
    counts = pipe.execute()[::2]
    for (_bucket, _who, limit), used, remaining in zip(spends, counts, keys, strict=True):
        if limit > 0 and int(used) > limit:
            raise RateLimited(extra={"retry_after": max(1, remaining)})


def auth_failure_limit() -> tuple[int, int]:
    return settings.EULER_AUTH_FAILURES_PER_MINUTE, 60


def auth_failure_address_limit() -> int:
    return settings.EULER_AUTH_FAILURES_PER_ADDRESS_PER_MINUTE
