"""Process-wide Redis clients (sync and asyncio) built from REDIS_URL."""

from __future__ import annotations

from functools import lru_cache

import redis
import redis.asyncio as aioredis
from django.conf import settings


@lru_cache(maxsize=1)
def client() -> redis.Redis:
    return redis.Redis.from_url(
        settings.REDIS_URL, socket_timeout=5, socket_connect_timeout=2, health_check_interval=30
    )


_async_clients: dict[int, aioredis.Redis] = {}


def async_client() -> aioredis.Redis:
    """One asyncio client per event loop (a client is bound to the loop that first used it)."""
    import asyncio

    loop = asyncio.get_running_loop()
    key = id(loop)
    found = _async_clients.get(key)
    if found is None:
        found = aioredis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=2, health_check_interval=30)
        _async_clients[key] = found
    return found
