"""Per-process routing state: agent tables cached briefly, passive ejection, balancer scores."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import DatabaseError, close_old_connections

from agents.models import ROUTABLE
from gateway import balancer
from quotas import scoped
from quotas.models import Quota


@dataclass(frozen=True)
class Upstream:
    id: int
    base_url: str
    weight: int


@dataclass
class Route:
    agent_id: int
    project_id: int
    name: str
    auth_header: tuple[str, str] | None
    connect_timeout: float
    response_timeout: float
    idle_timeout: float
    upstreams: list[Upstream]
    loaded_at: float
    max_concurrent: int | None = None  # the project's quota figure; None: EULER_GATEWAY_MAX_CONCURRENT
    scores: dict = field(default_factory=dict)
    service_managed: bool = False  # the agent of a service: a call finding no ready replica waits for one


@dataclass
class Ejection:
    failures: int = 0
    until: float = 0.0


STALE_FACTOR = 5
log = logging.getLogger(__name__)

_routes: dict[tuple[int, str], Route] = {}
_reloading: dict[tuple[int, str], asyncio.Future] = {}
_ejections: dict[int, Ejection] = {}


def _load(project_id: int, name: str) -> Route | None:
    close_old_connections()
    agent = scoped.agents(project=project_id).filter(name=name).first()
    if agent is None:
        return None
    upstreams = [
        Upstream(i.pk, i.base_url, i.weight)
        for i in agent.instances.filter(enabled=True, health__in=ROUTABLE).order_by("id")
    ]
    return Route(
        agent_id=agent.pk,
        project_id=project_id,
        name=name,
        auth_header=(agent.auth_header_name, agent.auth_header_value) if agent.has_auth_header else None,
        connect_timeout=agent.connect_timeout_s,
        response_timeout=agent.response_timeout_s,
        idle_timeout=agent.idle_timeout_s,
        upstreams=upstreams,
        loaded_at=time.monotonic(),
        max_concurrent=Quota.objects.filter(project_id=project_id)
        .values_list("max_concurrent_invocations", flat=True)
        .first(),
        service_managed=agent.service_managed,
    )


# Not thread-sensitive: Django's ASGI handler would run it on a fresh thread per request, and each
# such thread opens (and, with CONN_MAX_AGE, keeps) its own database connection. The loop's
# executor threads are few and reused, so their connections are too.
_aload = sync_to_async(_load, thread_sensitive=False)


async def route_for(project_id: int, name: str) -> Route | None:
    """The agent's routing table. Within EULER_GATEWAY_ROUTE_TTL it is used as is; for a while
    after (up to STALE_FACTOR times the TTL) it is still used while one background reload runs, so
    calls never wait on the database once an agent is warm; older or absent ones load inline."""
    key = (project_id, name)
    found = _routes.get(key)
    ttl = settings.EULER_GATEWAY_ROUTE_TTL
    if found is not None:
        age = time.monotonic() - found.loaded_at
        if age < ttl:
            return found
        if age < ttl * STALE_FACTOR:
            if key not in _reloading:
                _reloading[key] = task = asyncio.ensure_future(_reload(key))
                task.add_done_callback(lambda _t: _reloading.pop(key, None))
            return found
    return await _reload(key)


async def _reload(key: tuple[int, str]) -> Route | None:
    try:
        fresh = await _aload(*key)
    except DatabaseError:
        stale = _routes.get(key)
        if stale is None:
            raise
        log.warning("reloading the route of agent %s failed; using the last one", key[1], exc_info=True)
        return stale
    if fresh is None:
        _routes.pop(key, None)
        return None
    previous = _routes.get(key)
    if previous is not None:
        fresh.scores = previous.scores  # keep the rotation going across reloads
    _routes[key] = fresh
    return fresh


COLD_START_POLL = 0.5  # seconds between route reloads while a call waits for a service's first ready replica


async def wait_for_upstream(route: Route, wait: float) -> Route:
    """A service scaled to zero (or between replicas): the call, counted in flight (which wakes the autoscaler),
    waits up to `wait` seconds for a ready replica, reloading the route; the last route is returned either way."""
    deadline = time.monotonic() + wait
    key = (route.project_id, route.name)
    while not route.upstreams and time.monotonic() < deadline:
        await asyncio.sleep(min(COLD_START_POLL, max(0.0, deadline - time.monotonic())))
        fresh = await _reload(key)
        if fresh is None:
            break
        route = fresh
    return route


def choose(route: Route, exclude: set[int]) -> Upstream | None:
    now = time.monotonic()
    candidates = [u for u in route.upstreams if u.id not in exclude and _ejections.get(u.id, Ejection()).until <= now]
    chosen, route.scores = balancer.pick(((u.id, u.weight) for u in candidates), route.scores)
    return next((u for u in candidates if u.id == chosen), None)


def report(upstream_id: int, ok: bool) -> None:
    """Passive health: consecutive connect errors or 5xx eject an instance for a while."""
    if ok:
        if upstream_id in _ejections:
            del _ejections[upstream_id]
        return
    state = _ejections.setdefault(upstream_id, Ejection())
    state.failures += 1
    if state.failures >= settings.EULER_GATEWAY_EJECT_AFTER:
        state.until = time.monotonic() + settings.EULER_GATEWAY_EJECT_SECONDS
        state.failures = 0


def forget(project_id: int, name: str) -> None:
    """This process changed the agent (removed, created, an instance added or changed): its next call loads the
    route, rather than reuse one up to STALE_FACTOR × the TTL old — a removed agent re-added under its name would
    otherwise send its first calls to the old instances. Other web processes reload within the TTL."""
    _routes.pop((project_id, name), None)


def reset() -> None:
    """Forget everything (tests; a process that changed its settings)."""
    _routes.clear()
    _ejections.clear()
    _reloading.clear()
