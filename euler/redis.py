"""Process-wide Redis clients (sync and asyncio) built from REDIS_URL."""

from __future__ import annotations

import asyncio
import weakref
from functools import lru_cache

import redis
import redis.asyncio as aioredis
from django.conf import settings


@lru_cache(maxsize=1)
def client() -> redis.Redis:
    return redis.Redis.from_url(
        settings.REDIS_URL, socket_timeout=5, socket_connect_timeout=2, health_check_interval=30
    )


# Connections one event loop's client may hold. A web process can have a thousand calls in flight at the
# gateway, each asking Redis for its lease and its count: past this many they wait for a free connection (up
# to ASYNC_POOL_WAIT seconds) instead of failing at once, which answered 500 and let calls past the
# per-project cap (bench/gateway_fair.py).
ASYNC_POOL_MAX = 1024
ASYNC_POOL_WAIT = 5.0

# A client is bound to the loop that first used it; keyed weakly by the loop, so a closed loop's client
# goes with it (an id() key could be reused by a later loop and hand it a dead client).
_async_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aioredis.Redis] = weakref.WeakKeyDictionary()


def async_client() -> aioredis.Redis:
    """One asyncio client per event loop."""
    loop = asyncio.get_running_loop()
    found = _async_clients.get(loop)
    if found is None:
        pool = aioredis.BlockingConnectionPool.from_url(
            settings.REDIS_URL,
            max_connections=ASYNC_POOL_MAX,
            timeout=ASYNC_POOL_WAIT,
            socket_connect_timeout=2,
            health_check_interval=30,
        )
        found = aioredis.Redis(connection_pool=pool)
        _async_clients[loop] = found
    return found
