"""The pure fairness core (workflows/fairness.py): turns per project, budget shares, schedule limits."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from workflows import dispatch, fairness
from workflows.fairness import ScheduleLimits, check_schedule, interleave, shares


def test_interleave_takes_one_of_each_project_per_turn():
    groups = {"a": [1, 2, 3, 4], "b": [10], "c": [20, 21]}
    assert interleave(groups) == [1, 10, 20, 2, 21, 3, 4]


def test_interleave_follows_the_given_order_and_skips_empty_groups():
    assert interleave({"a": [1, 2], "b": [10, 11], "c": []}, order=["b", "c", "a"]) == [10, 1, 11, 2]
    assert interleave({}) == []


def test_a_project_with_thousands_due_puts_one_item_ahead_of_anothers_first():
    order = interleave({"flood": list(range(5000)), "quiet": ["tick"]})
    assert order.index("tick") == 1 and len(order) == 5001


def test_shares_give_the_small_what_they_want_and_split_the_rest_evenly():
    assert shares({"a": 100_000, "b": 3}, 2000) == {"a": 1997, "b": 3}
    assert shares({"a": 100_000, "b": 100_000}, 2000) == {"a": 1000, "b": 1000}
    assert shares({"a": 5, "b": 0, "c": 7}, 100) == {"a": 5, "b": 0, "c": 7}


def test_shares_never_exceed_the_budget_and_serve_everyone_when_it_is_tight():
    wanted = {p: 50 for p in range(10)}
    out = shares(wanted, 7)
    assert sum(out.values()) == 7 and all(v in (0, 1) for v in out.values())
    assert shares({"a": 10}, 0) == {"a": 0}


@pytest.mark.parametrize("budget", [1, 13, 99, 2000])
def test_shares_are_max_min_fair(budget):
    wanted = {"a": 1, "b": 40, "c": 10_000, "d": 10_000}
    out = shares(wanted, budget)
    assert sum(out.values()) == min(budget, sum(wanted.values()))
    assert all(0 <= out[k] <= wanted[k] for k in wanted)
    hungry = [k for k in wanted if out[k] < wanted[k]]
    assert max(out[k] for k in hungry) - min(out[k] for k in hungry) <= 1  # the unsatisfied share alike


def test_a_project_at_its_pending_cap_reads_no_events():
    assert dispatch.wanted_events(hooks=20, pending=1000, cap=1000) == 0
    assert dispatch.wanted_events(hooks=20, pending=990, cap=1000) == 1  # ten places, twenty hooks: one event
    assert dispatch.wanted_events(hooks=1, pending=0, cap=1000) == 1000
    assert dispatch.wanted_events(hooks=0, pending=0, cap=1000) == 0


def test_the_shortest_gap_and_the_busiest_rate_of_ticks():
    t = datetime(2026, 1, 1, tzinfo=UTC)
    ticks = [t, t + timedelta(minutes=5), t + timedelta(minutes=6), t + timedelta(hours=1)]
    assert fairness.shortest_gap(ticks) == 60.0 and fairness.runs_per_minute(60.0) == 1.0
    assert fairness.shortest_gap([t]) is None and fairness.runs_per_minute(None) == 0.0


LIMITS = ScheduleLimits(max_schedules=3, min_period=300, runs_per_minute=1)


@pytest.mark.parametrize(
    "kw, code",
    [
        ({"others": 3, "others_rate": 0.0, "gap": 3600.0, "enabled": True, "new": True}, "schedule_limit"),
        ({"others": 0, "others_rate": 0.0, "gap": 60.0, "enabled": True, "new": True}, "schedule_period_too_short"),
        ({"others": 2, "others_rate": 0.9, "gap": 300.0, "enabled": True, "new": False}, "schedule_rate_limit"),
        ({"others": 2, "others_rate": 0.8, "gap": 300.0, "enabled": True, "new": False}, None),  # 1.0 a minute
        ({"others": 2, "others_rate": 0.9, "gap": 300.0, "enabled": False, "new": True}, None),  # off: no rate
        ({"others": 3, "others_rate": 0.0, "gap": 3600.0, "enabled": True, "new": False}, None),  # a change
        ({"others": 0, "others_rate": 0.0, "gap": None, "enabled": True, "new": True}, None),  # fires once
    ],
)
def test_schedule_limits(kw, code):
    refusal = check_schedule(LIMITS, **kw)
    assert (refusal.code if refusal else None) == code
    if refusal:
        assert refusal.status == (400 if code == "schedule_period_too_short" else 429)
