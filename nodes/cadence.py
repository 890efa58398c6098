"""The heartbeat cadence: the interval handed to nodes, nodes ÷ the live web processes' budgets (learnt from
Redis every few seconds), and the long-poll wait that follows it."""

from __future__ import annotations

import logging
import time

from django.conf import settings
from redis.exceptions import RedisError

from nodeagent import protocol
from nodes import livestore, policy, webload

log = logging.getLogger(__name__)

_registry = {"at": -1e9, "nodes": 0, "budget": 0.0}


def registration_due() -> bool:
    return time.monotonic() - _registry["at"] >= settings.EULER_NODE_WEB_TTL / 3


def apply_registration(members: list, count: int) -> None:
    own = settings.EULER_NODE_HEARTBEAT_BUDGET
    members = [m.decode() if isinstance(m, bytes) else m for m in members]
    _registry.update(at=time.monotonic(), nodes=int(count), budget=policy.total_budget(members, own=own))


def interval_for(nodes: int, budget: float, *, jitter: float | None = None) -> float:
    """policy.heartbeat_interval with this deployment's settings: `nodes` sharing `budget` heartbeats/s."""
    return policy.heartbeat_interval(
        nodes,
        min_interval=settings.EULER_NODE_HEARTBEAT_MIN_INTERVAL,
        budget=budget or settings.EULER_NODE_HEARTBEAT_BUDGET,
        max_interval=settings.EULER_NODE_HEARTBEAT_MAX_INTERVAL,
        jitter=settings.EULER_NODE_HEARTBEAT_JITTER if jitter is None else jitter,
    )


def interval_now(*, jitter: float | None = None) -> float:
    """The interval from what this process last learnt (no I/O): nodes known to Redis ÷ total live budget."""
    return interval_for(_registry["nodes"], _registry["budget"], jitter=jitter)


def register_web() -> None:
    """Register this process's budget (sync callers; the async hot path piggybacks on its own round trip)."""
    try:
        members, count = livestore.registration(
            settings.EULER_NODE_HEARTBEAT_BUDGET, settings.EULER_NODE_WEB_TTL, load=webload.take()
        )
    except RedisError:
        log.warning("could not register the heartbeat budget in Redis")
        return
    apply_registration(members, count)


def next_interval() -> float:
    if registration_due():
        register_web()
    return interval_now()


def poll_wait_for(interval: float) -> float:
    """policy.poll_wait with this deployment's settings."""
    cap = min(settings.EULER_NODE_POLL_WAIT_MAX, protocol.POLL_WAIT_MAX_SECONDS)
    return policy.poll_wait(interval, floor=protocol.POLL_WAIT_SECONDS, cap=cap)


def expire_registration() -> None:
    """Have the next heartbeat renew this process's registration and learn the others' budgets at once."""
    _registry["at"] = -1e9


def reset() -> None:
    """Forget what was learnt (tests: every test starts without a registration)."""
    _registry.update(at=-1e9, nodes=0, budget=0.0)
