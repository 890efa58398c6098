"""Autoscaling: how many replicas a service keeps, from the calls in flight that the gateway counts.

The gateway counts each call in flight to an agent in Redis (gateway/limits.py, a lease per call shared by every
web process, so the figure holds with N of them). Each controller pass samples the service's figure into a short
Redis list; `decide` (pure) reads those samples:
- up: the mean in flight over the short window (EULER_SERVICE_SCALE_UP_WINDOW) needs ceil(mean / target)
  replicas; more than now: scale up at once (capped by replicas.max);
- down: only once the long window (EULER_SERVICE_SCALE_DOWN_WINDOW) is covered by samples, to
  ceil(peak over it / target), never under replicas.min (nor under 1 unless scale to zero applies);
- to zero: with scale_to_zero_after_seconds and replicas.min 0, after that long with nothing in flight;
- from zero: any call in flight (the gateway holds the first call, counted, until a replica is ready) → 1.
A range with min == max is a fixed count: nothing to decide.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Policy:
    low: int
    high: int
    target: int
    up_window: float
    down_window: float
    zero_after: float | None = None  # seconds idle before scaling to zero; None: never


def decide(current: int, samples: list[tuple[float, int]], now: float, policy: Policy) -> int:
    """The replica count to keep. `samples`: (time, calls in flight), any order."""
    if policy.low == policy.high:
        return policy.low
    floor = 0 if policy.zero_after is not None and policy.low == 0 else max(policy.low, 1)
    samples = sorted(samples)
    if not samples:
        return min(max(current, floor), policy.high)
    latest = samples[-1][1]
    if current == 0:
        return min(1, policy.high) if latest > 0 else 0
    recent = [n for t, n in samples if now - t <= policy.up_window]
    if recent:
        wanted = math.ceil((sum(recent) / len(recent)) / policy.target)
        if wanted > current:
            return min(wanted, policy.high)
    oldest = samples[0][0]
    if (
        floor == 0
        and now - oldest >= policy.zero_after
        and all(n == 0 for t, n in samples if now - t <= policy.zero_after)
    ):
        return 0
    if now - oldest >= policy.down_window:
        peak = max(n for t, n in samples if now - t <= policy.down_window)
        wanted = max(math.ceil(peak / policy.target), floor, 1)
        if wanted < current:
            return max(wanted, policy.low)
    return min(max(current, floor), policy.high)


RETENTION_MARGIN = 30.0  # seconds of samples kept past the longest window, so that a window is ever fully covered


def retention(policy: Policy) -> float:
    """How far back samples are kept: past the longest window, else its coverage test would never pass."""
    return max(policy.up_window, policy.down_window, policy.zero_after or 0.0) + RETENTION_MARGIN
