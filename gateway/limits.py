"""Fair use of the gateway, shared by every web process through Redis.

Concurrency: each project has a sorted set of leases (`euler:gw:conc:{project}`), one member per
upstream call in flight, scored by the time it expires. A call takes a lease in one script (drop
expired leases, count, add) and gives it back when its relay ends, however it ends: the relay's
`finally`, or a finalizer on the relay when it is dropped without ever being started (a client that
went away before the first byte). A process renews the leases it holds every third of their
lifetime, so a long stream keeps its lease and a process that dies loses its leases within
EULER_GATEWAY_LEASE_SECONDS.

Calls per minute per key (LiteLLM's `rpm_limit`): a sliding window approximated from two fixed
one-minute counters, the previous one weighted by how much of it is still in view, rounded up: the calls of the
previous minute that are partly in view count whole, so a key that spent its limit just before a minute's turn
gets no extra call just after it (rounded down, `limit` calls at hh:mm:59.9 let one more through at :00.1).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import uuid
import weakref

from django.conf import settings
from redis.exceptions import RedisError

from euler.redis import async_client, client

log = logging.getLogger(__name__)

_ACQUIRE = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[4])
redis.call('EXPIRE', KEYS[1], ARGV[5])
return 1
"""

_RPM = """
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
local previous = tonumber(redis.call('GET', KEYS[2]) or '0')
if math.ceil(previous * tonumber(ARGV[2]) - 1e-9) + current >= tonumber(ARGV[1]) then
  return {0, current, previous}
end
redis.call('INCR', KEYS[1])
redis.call('EXPIRE', KEYS[1], 130)
return {1, current + 1, previous}
"""

WINDOW = 60.0

# Leases this process holds: member -> set key. Renewed by one task per event loop.
_held: dict[str, str] = {}
_releasing: set[asyncio.Task] = set()
_renewers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Task] = weakref.WeakKeyDictionary()


def _set_key(project_id: int) -> str:
    return f"euler:gw:conc:{project_id}"


def _agent_key(agent_id: int) -> str:
    return f"euler:gw:agent:{agent_id}"


AGENT_SUFFIX = "@a"  # the same call's member in its agent's set (no cap there: the services autoscaler reads it)


async def acquire(project_id: int, limit: int, agent_id: int | None = None) -> str | None:
    """A lease id for one upstream call of the project, or None when `limit` are in flight. With `agent_id`, the
    call is also counted in flight for that agent (services/autoscale.py reads it), under the same lease."""
    lifetime = settings.EULER_GATEWAY_LEASE_SECONDS
    member = uuid.uuid4().hex
    key = _set_key(project_id)
    now = time.time()
    try:
        taken = await async_client().eval(_ACQUIRE, 1, key, now, now + lifetime, limit, member, math.ceil(lifetime) + 5)
    except RedisError:
        # Redis is the shared counter; without it the cap cannot be kept, and refusing every call
        # would turn a counter's outage into the gateway's.
        log.warning("gateway concurrency lease not taken: Redis unreachable; the call goes ahead", exc_info=True)
        return ""
    if not taken:
        return None
    _held[member] = key
    if agent_id is not None:
        agent_key = _agent_key(agent_id)
        try:
            pipe = async_client().pipeline(transaction=False)
            pipe.zadd(agent_key, {member + AGENT_SUFFIX: now + lifetime})
            pipe.expire(agent_key, math.ceil(lifetime) + 5)
            await pipe.execute()
            _held[member + AGENT_SUFFIX] = agent_key
        except RedisError:
            log.warning("gateway agent in-flight count not kept: Redis unreachable", exc_info=True)
    _ensure_renewer()
    return member


async def release(lease: str | None) -> None:
    """Give the lease back. The removal runs as its own task: a relay closed by a client that left
    is being cancelled, and an await here would be cancelled with it, leaving the lease to expire."""
    key = _held.pop(lease, None) if lease else None
    if key is None:
        return
    for member, set_key in ((lease, key), (lease + AGENT_SUFFIX, _held.pop(lease + AGENT_SUFFIX, None))):
        if set_key is None:
            continue
        task = asyncio.get_running_loop().create_task(_zrem(set_key, member))
        _releasing.add(task)
        task.add_done_callback(_releasing.discard)


async def _zrem(key: str, lease: str) -> None:
    try:
        await async_client().zrem(key, lease)
    except RedisError:
        log.warning("gateway concurrency lease not released: Redis unreachable; it expires", exc_info=True)


def release_when_dropped(owner: object, lease: str | None) -> None:
    """Give the lease back when `owner` (the relay generator) is collected, if nothing released it before."""
    if lease:
        weakref.finalize(owner, _release_sync, lease)


def _release_sync(lease: str) -> None:
    key = _held.pop(lease, None)
    if key is None:
        return
    agent_key = _held.pop(lease + AGENT_SUFFIX, None)
    try:
        client().zrem(key, lease)
        if agent_key is not None:
            client().zrem(agent_key, lease + AGENT_SUFFIX)
    except RedisError:
        log.warning("gateway concurrency lease not released: Redis unreachable; it expires", exc_info=True)


def _ensure_renewer() -> None:
    loop = asyncio.get_running_loop()
    task = _renewers.get(loop)
    if task is None or task.done():
        _renewers[loop] = loop.create_task(_renew_forever())


async def _renew_forever() -> None:
    while True:
        lifetime = settings.EULER_GATEWAY_LEASE_SECONDS
        await asyncio.sleep(lifetime / 3)
        if not _held:
            continue
        try:
            await renew()
        except RedisError:
            log.warning("gateway concurrency leases not renewed: Redis unreachable", exc_info=True)


async def renew() -> int:
    """Push the expiry of every lease this process holds; returns how many were renewed."""
    held = list(_held.items())
    if not held:
        return 0
    expires = time.time() + settings.EULER_GATEWAY_LEASE_SECONDS
    pipe = async_client().pipeline(transaction=False)
    for member, key in held:
        pipe.zadd(key, {member: expires}, xx=True)
    await pipe.execute()
    return len(held)


async def in_flight(project_id: int) -> int:
    """Leases of the project that have not expired (all processes)."""
    r = async_client()
    key = _set_key(project_id)
    await r.zremrangebyscore(key, "-inf", time.time())
    return await r.zcard(key)


def agent_in_flight(agent_id: int) -> int:
    """Calls in flight to the agent through every web process (leases not expired); sync, for the controller."""
    r = client()
    key = _agent_key(agent_id)
    pipe = r.pipeline(transaction=False)
    pipe.zremrangebyscore(key, "-inf", time.time())
    pipe.zcard(key)
    return int(pipe.execute()[-1])


def rpm_retry_after(limit: int, current: int, previous: int, elapsed: float) -> int:
    """Seconds until one more call fits under `limit` in the sliding window (pure)."""
    if current >= limit:
        return max(1, math.ceil(WINDOW - elapsed))
    # ceil(previous * (1 - t / WINDOW)) + current < limit  <=>  previous * (1 - t / WINDOW) <= limit - current - 1
    #   <=>  t >= WINDOW * (1 - (limit - current - 1) / previous)
    needed = WINDOW * (1 - (limit - current - 1) / previous) if previous else 0.0
    return max(1, math.ceil(needed - elapsed))


async def rpm_check(key_id: int, limit: int) -> int | None:
    """Count one call of the key; None when allowed, else the Retry-After seconds."""
    now = time.time()
    window = int(now // WINDOW)
    elapsed = now - window * WINDOW
    keys = (f"euler:gw:rpm:{key_id}:{window}", f"euler:gw:rpm:{key_id}:{window - 1}")
    try:
        allowed, current, previous = await async_client().eval(_RPM, 2, *keys, limit, 1 - elapsed / WINDOW)
    except RedisError:
        log.warning("gateway rpm limit not checked: Redis unreachable; the call goes ahead", exc_info=True)
        return None
    if allowed:
        return None
    return rpm_retry_after(limit, int(current), int(previous), elapsed)


def forget() -> None:
    """Drop this process's lease bookkeeping (tests)."""
    _held.clear()
