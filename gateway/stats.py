"""Invocation figures for an agent over a window: pure summaries over plain rows, and the query."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime, timedelta

WINDOWS = {"1h": timedelta(hours=1), "24h": timedelta(hours=24), "7d": timedelta(days=7)}


def percentile(sorted_values: list[float], q: float) -> float | None:
    """Nearest-rank percentile of an ascending list (q in 0..100)."""
    if not sorted_values:
        return None
    rank = max(1, -(-len(sorted_values) * q // 100))  # ceil without floats drifting
    return sorted_values[min(len(sorted_values), int(rank)) - 1]


def summarise(rows: Iterable[tuple[int, float]]) -> dict:
    """rows: (status, latency_ms). Success means a status below 500 (the caller's 4xx is the caller's)."""
    statuses, latencies = [], []
    for status, latency in rows:
        statuses.append(status)
        latencies.append(latency)
    latencies.sort()
    calls = len(statuses)
    ok = sum(1 for s in statuses if s < 500)
    return {
        "calls": calls,
        "success_rate": round(ok / calls, 4) if calls else None,
        "p50_ms": _round(percentile(latencies, 50)),
        "p95_ms": _round(percentile(latencies, 95)),
        "p99_ms": _round(percentile(latencies, 99)),
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def status_class(status: int) -> str:
    return f"{status // 100}xx"


def breakdown(rows: Iterable[tuple[int | None, int, float]]) -> dict:
    """rows: (instance id, status, latency_ms) → totals, per instance and per status class."""
    rows = list(rows)
    per_instance: dict[int | None, list] = defaultdict(list)
    per_class: dict[str, list] = defaultdict(list)
    for instance_id, status, latency in rows:
        per_instance[instance_id].append((status, latency))
        per_class[status_class(status)].append((status, latency))
    return {
        "total": summarise((s, lat) for _, s, lat in rows),
        "instances": [
            {"instance_id": instance_id, **summarise(items)}
            for instance_id, items in sorted(per_instance.items(), key=lambda kv: (kv[0] is None, kv[0] or 0))
        ],
        "status_classes": {name: summarise(items)["calls"] for name, items in sorted(per_class.items())},
    }


def agent_stats(*, agent, window: str, now: datetime) -> dict:
    from gateway.models import Invocation

    since = now - WINDOWS[window]
    rows = Invocation.objects.filter(agent=agent, created_at__gte=since).values_list(
        "instance_id", "status", "latency_ms"
    )
    return {"agent": agent.name, "window": window, "since": since, "until": now, **breakdown(rows.iterator())}
