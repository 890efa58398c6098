"""Active health checks: a pure state step per result, and the shell that probes due instances."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

import httpx
from django.db.models import F
from django.utils import timezone

from agents import ssrf
from agents.models import AgentInstance, Health

UNHEALTHY_AFTER = 2
HEALTHY_AFTER = 2
LATENCY_ALPHA = 0.3  # weight of the newest sample in the rolling latency


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
        response = await client.get(probe.url, headers=probe.headers, timeout=probe.timeout)
        ok = 200 <= response.status_code < 400
        error = "" if ok else f"HTTP {response.status_code}"
    except httpx.HTTPError as exc:
        ok, error = False, f"{type(exc).__name__}: {exc}"[:500]
    return probe.instance_id, ok, (time.perf_counter() - started) * 1000, error


def due_probes(now: datetime, instance_ids: list[int] | None = None) -> list[Probe]:
    rows = AgentInstance.objects.filter(enabled=True).select_related("agent")
    if instance_ids is not None:
        rows = rows.filter(pk__in=instance_ids)
    probes = []
    for row in rows:
        agent = row.agent
        if (
            instance_ids is None
            and row.last_check_at
            and row.last_check_at > now - timedelta(seconds=agent.health_interval_s - 0.5)
        ):
            continue
        headers = {agent.auth_header_name: agent.auth_header_value} if agent.has_auth_header else {}
        probes.append(Probe(row.pk, row.base_url + agent.health_path, agent.health_timeout_s, headers))
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
    async with ssrf.pinned_client() as client:
        return await asyncio.gather(*(_probe(client, p) for p in probes))


def run_checks(instance_ids: list[int] | None = None) -> int:
    """Probe every due instance (or the given ones, due or not) concurrently; returns how many."""
    now = timezone.now()
    probes = due_probes(now, instance_ids)
    if not probes:
        return 0
    results = asyncio.run(_run(probes))
    for instance_id, ok, latency_ms, error in results:
        record(instance_id, ok, latency_ms, error, timezone.now())
    return len(results)
