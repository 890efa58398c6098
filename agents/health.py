"""Active health checks: a pure state step per result, and the shell that probes due instances.

An upstream is a tenant's server: whatever it does, a check round costs at most one deadline. Each probe has
one deadline for the whole exchange (connect, headers and body: the agent's `health_timeout_s`, at most
EULER_AGENT_HEALTH_DEADLINE), reads at most MAX_BODY bytes of the answer (more is a failure), and all the due
probes of a round run at once on one event loop, at most EULER_AGENT_HEALTH_BATCH of them (the others stay due
for the next round). Connections go through the SSRF guard's pinned client: the checked address is dialled.
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta

import httpx
from django.conf import settings
from django.db.models import F
from django.utils import timezone

from agents import ssrf
from agents.models import AgentInstance, Health
from gateway import tunnel

UNHEALTHY_AFTER = 2
HEALTHY_AFTER = 2
LATENCY_ALPHA = 0.3  # weight of the newest sample in the rolling latency
MAX_BODY = 64 * 1024  # bytes of a health answer read at most; a longer answer fails the check
CLOSE_WAIT = 2.0  # seconds a closing round waits for the tasks it cancelled (a Redis cleaner) to end


@dataclass(frozen=True)
class Counters:
    health: str
    successes: int
    failures: int


def step(before: Counters, ok: bool) -> Counters:
    """The next health state after one check result (thresholds as in Envoy/nginx)."""
    if ok:
        successes, failures = before.successes + 1, 0
        recovered = before.health != Health.UNHEALTHY or successes >= HEALTHY_AFTER
        health = Health.HEALTHY if recovered else before.health
    else:
        successes, failures = 0, before.failures + 1
        health = Health.UNHEALTHY if failures >= UNHEALTHY_AFTER else before.health
    return Counters(str(health), successes, failures)


def rolling(previous: float | None, sample: float) -> float:
    return sample if previous is None else previous + LATENCY_ALPHA * (sample - previous)


@dataclass(frozen=True)
class Probe:
    instance_id: int
    url: str
    timeout: float
    headers: dict


async def _probe(client: httpx.AsyncClient, probe: Probe) -> tuple[int, bool, float, str]:
    started = time.perf_counter()
    try:
        async with asyncio.timeout(probe.timeout):
            async with client.stream("GET", probe.url, headers=probe.headers, timeout=probe.timeout) as response:
                size = 0
                async for chunk in response.aiter_raw():
                    size += len(chunk)
                    if size > MAX_BODY:
                        break
        if size > MAX_BODY:
            ok, error = False, f"the answer is larger than {MAX_BODY // 1024} KiB"
        else:
            ok = 200 <= response.status_code < 400
            error = "" if ok else f"HTTP {response.status_code}"
    except TimeoutError:
        ok, error = False, f"no complete answer within {probe.timeout:g} s"
    except httpx.HTTPError as exc:
        ok, error = False, f"{type(exc).__name__}: {exc}"[:500]
    except Exception as exc:  # noqa: BLE001 - one upstream's oddity never ends the round for the others
        ok, error = False, type(exc).__name__
    return probe.instance_id, ok, (time.perf_counter() - started) * 1000, error


def due_probes(now: datetime, instance_ids: list[int] | None = None) -> list[Probe]:
    """The probes of one round: due instances (or the given ones), least recently checked first, at most
    EULER_AGENT_HEALTH_BATCH (the rest stay due and go in the next round)."""
    rows = AgentInstance.objects.filter(enabled=True).select_related("agent")
    if instance_ids is not None:
        rows = rows.filter(pk__in=instance_ids)
    deadline = settings.EULER_AGENT_HEALTH_DEADLINE
    probes = []
    for row in rows.order_by(F("last_check_at").asc(nulls_first=True), "pk"):
        agent = row.agent
        if (
            instance_ids is None
            and row.last_check_at
            and row.last_check_at > now - timedelta(seconds=agent.health_interval_s - 0.5)
        ):
            continue
        headers = {agent.auth_header_name: agent.auth_header_value} if agent.has_auth_header else {}
        timeout = min(agent.health_timeout_s, deadline)
        probes.append(Probe(row.pk, row.base_url + agent.health_path, timeout, headers))
        if len(probes) >= settings.EULER_AGENT_HEALTH_BATCH:
            break
    return probes


def record(instance_id: int, ok: bool, latency_ms: float, error: str, now: datetime) -> None:
    row = AgentInstance.objects.filter(pk=instance_id).first()
    if row is None:
        return
    after = step(Counters(row.health, row.consecutive_successes, row.consecutive_failures), ok)
    AgentInstance.objects.filter(pk=instance_id).update(
        health=after.health,
        consecutive_successes=after.successes,
        consecutive_failures=after.failures,
        last_check_at=now,
        last_error="" if ok else error,
        latency_ms=rolling(row.latency_ms, latency_ms) if ok else F("latency_ms"),
    )


async def _run(probes: list[Probe]) -> list[tuple[int, bool, float, str]]:
    # One connection per probe: a pool smaller than the round would queue probes behind slow upstreams.
    limits = httpx.Limits(max_connections=len(probes), max_keepalive_connections=0)
    # euler-node://<attempt>:<port>: a replica behind its node's tunnel (gateway/tunnel.py), probed through it
    async with tunnel.loop_hub(), ssrf.pinned_client(limits=limits, mounts=tunnel.mounts(limits)) as client:
        return await asyncio.gather(*(_probe(client, p) for p in probes))


def _run_round(probes: list[Probe]) -> list[tuple[int, bool, float, str]]:
    """The probes on a fresh event loop whose resolver threads are not waited for at the end: asyncio.run would
    wait for a getaddrinfo that hangs, past the deadline that already failed its probe."""
    loop = asyncio.new_event_loop()
    executor = ThreadPoolExecutor(max_workers=min(32, len(probes)), thread_name_prefix="euler-health")
    loop.set_default_executor(executor)
    try:
        return loop.run_until_complete(_run(probes))
    finally:
        executor.shutdown(wait=False, cancel_futures=True)
        close_loop(loop)


def close_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Close a round's loop as asyncio.run closes its own: the tasks still on it (a library's cleaner a cancel
    started) are cancelled and awaited, their errors retrieved, before the loop goes; none is left to fail later
    on a closed connection and be reported when the collector finds it."""
    try:
        left = [task for task in asyncio.all_tasks(loop) if not task.done()]
        if left:  # cancelled again until they end: a cancel can be consumed inside a Redis read (gateway/tunnel.py)
            loop.run_until_complete(tunnel.end_tasks(left, CLOSE_WAIT))
        for task in left:
            if task.done() and not task.cancelled():
                task.exception()  # retrieved: not logged as "never retrieved"
        loop.run_until_complete(loop.shutdown_asyncgens())
    finally:
        loop.close()


def run_checks(instance_ids: list[int] | None = None) -> int:
    """Probe every due instance (or the given ones, due or not) concurrently; returns how many."""
    now = timezone.now()
    probes = due_probes(now, instance_ids)
    if not probes:
        return 0
    results = _run_round(probes)
    for instance_id, ok, latency_ms, error in results:
        record(instance_id, ok, latency_ms, error, timezone.now())
    return len(results)
