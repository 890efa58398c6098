"""Per-agent figures over time: calls, success rate, p50/p95 latency per bucket (pure)."""

from __future__ import annotations

from datetime import datetime, timedelta


def buckets(rows, *, start: datetime, step: timedelta, count: int) -> list[dict]:
    """rows: (created_at, status, latency_ms) → `count` buckets of `step` from `start`, empty ones included."""
    from gateway.stats import summarise  # late: the gateway app may be absent

    grouped: list[list[tuple[int, float]]] = [[] for _ in range(count)]
    for created_at, status, latency in rows:
        index = (created_at - start) // step
        if 0 <= index < count:
            grouped[index].append((status, latency))
    out = []
    for i, items in enumerate(grouped):
        figures = summarise(items)
        out.append({"start": start + i * step, **figures})
    return out
