"""Shared background work taken in turns per project, pure: which due schedules a tick pass runs first, how a
dispatch pass shares its event budget, and the per-project schedule limits (plain data in, decisions out).

A pass serves projects round by round: one item of every project that has any, then a second of each, and so
on, so that a project with 5,000 due schedules (or 200,000 new job events) puts one item ahead of another
project's first, never its whole backlog.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime


def interleave(groups: dict[Hashable, Sequence], order: Iterable[Hashable] | None = None) -> list:
    """The items of every group, round-robin: the first of each group (in `order`, default the dict's), then
    the second of each, and so on. Nothing is dropped, nothing is repeated."""
    keys = [k for k in (order if order is not None else groups) if groups.get(k)]
    longest = max((len(groups[k]) for k in keys), default=0)
    return [groups[k][i] for i in range(longest) for k in keys if i < len(groups[k])]


def shares(wanted: dict[Hashable, int], budget: int) -> dict[Hashable, int]:
    """Split `budget` among projects that want `wanted[p]` items each: max-min fair (water-filling), so a
    project that wants little gets all of it and the rest is shared evenly among the hungry ones. The sum
    never exceeds `budget`; a project wanting nothing gets 0."""
    out = dict.fromkeys(wanted, 0)
    left = max(0, budget)
    hungry = sorted((k for k, n in wanted.items() if n > 0), key=lambda k: wanted[k])
    while hungry and left > 0:
        even = max(1, left // len(hungry))
        for k in hungry:
            take = min(even, wanted[k] - out[k], left)
            out[k] += take
            left -= take
        hungry = [k for k in hungry if out[k] < wanted[k]]
    return out


def shortest_gap(ticks: Sequence[datetime]) -> float | None:
    """The shortest time between two consecutive ticks, in seconds (None: fewer than two ticks)."""
    gaps = [(b - a).total_seconds() for a, b in zip(ticks, ticks[1:], strict=False)]
    return min(gaps) if gaps else None


def runs_per_minute(gap: float | None) -> float:
    """A schedule's busiest rate (runs per minute) from its shortest gap between ticks."""
    return 0.0 if not gap else 60.0 / gap


@dataclass(frozen=True)
class ScheduleLimits:
    max_schedules: int
    min_period: int  # seconds
    runs_per_minute: int


@dataclass(frozen=True)
class Refusal:
    code: str
    message: str
    status: int  # 400: the schedule itself is not allowed; 429: the project's quota is used up


def check_schedule(
    limits: ScheduleLimits, *, others: int, others_rate: float, gap: float | None, enabled: bool, new: bool
) -> Refusal | None:
    """Whether a project may keep this schedule: `others` schedules besides it whose enabled ones add up to
    `others_rate` runs per minute; `gap` is its shortest gap between ticks (seconds)."""
    if new and others + 1 > limits.max_schedules:
        return Refusal("schedule_limit", f"the project may keep at most {limits.max_schedules} schedules.", 429)
    if gap is not None and gap < limits.min_period:
        return Refusal(
            "schedule_period_too_short",
            f"this cron fires {gap:g} s apart at its busiest; the project's minimum period is {limits.min_period} s.",
            400,
        )
    rate = runs_per_minute(gap)
    if enabled and others_rate + rate > limits.runs_per_minute + 1e-9:
        return Refusal(
            "schedule_rate_limit",
            f"the project's enabled schedules would run {others_rate + rate:.4g} times a minute at their busiest; "
            f"its quota is {limits.runs_per_minute}.",
            429,
        )
    return None
