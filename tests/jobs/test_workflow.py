"""The pure rules of arrays and dependencies (jobs.workflow): verdicts, aggregate state, slots, cycles."""

from __future__ import annotations

import pytest

from jobs import workflow


@pytest.mark.parametrize(
    ("condition", "state", "verdict"),
    [
        ("succeeded", "queued", "pending"),
        ("succeeded", "waiting", "pending"),
        ("succeeded", "running", "pending"),
        ("succeeded", "succeeded", "met"),
        ("succeeded", "failed", "never"),
        ("succeeded", "cancelled", "never"),
        ("succeeded", "lost", "never"),
        ("ended", "running", "pending"),
        ("ended", "failed", "met"),
        ("ended", "cancelled", "met"),
        ("ended", "succeeded", "met"),
    ],
)
def test_a_job_dependency_verdict_follows_its_condition(condition, state, verdict):
    assert workflow.job_verdict(condition, state) == verdict


def test_a_job_that_never_ran_for_a_failed_dependency_meets_no_condition():
    assert workflow.job_verdict("ended", "cancelled", "dependency_failed") == "never"
    assert workflow.job_verdict("ended", "cancelled", "cancelled") == "met"
    assert workflow.array_verdict("ended", workflow.full_counts([("cancelled", 3)]), 3, broken=True) == "never"


def test_an_array_succeeded_dependency_fails_at_once_when_one_task_fails():
    counts = workflow.full_counts([("running", 8), ("failed", 1), ("succeeded", 1)])
    assert workflow.array_verdict("succeeded", counts, 10) == "never"
    assert workflow.array_verdict("ended", counts, 10) == "pending"


def test_an_array_dependency_is_met_when_every_task_meets_it():
    assert workflow.array_verdict("succeeded", workflow.full_counts([("succeeded", 10)]), 10) == "met"
    assert workflow.array_verdict("succeeded", workflow.full_counts([("succeeded", 9), ("queued", 1)]), 10) == "pending"
    ended = workflow.full_counts([("succeeded", 5), ("failed", 3), ("cancelled", 2)])
    assert workflow.array_verdict("ended", ended, 10) == "met"


@pytest.mark.parametrize(
    ("rows", "state"),
    [
        ([("running", 1), ("waiting", 9)], "running"),
        ([("assigned", 1), ("succeeded", 9)], "running"),
        ([("queued", 2), ("waiting", 8)], "queued"),
        ([("waiting", 10)], "waiting"),
        ([("succeeded", 10)], "succeeded"),
        ([("succeeded", 9), ("failed", 1)], "failed"),
        ([("succeeded", 9), ("lost", 1)], "failed"),
        ([("succeeded", 5), ("cancelled", 5)], "cancelled"),
    ],
)
def test_the_array_state_aggregates_its_tasks(rows, state):
    assert workflow.array_state(workflow.full_counts(rows), 10) == state


def test_full_counts_names_every_state():
    counts = workflow.full_counts([("running", 2)])
    assert set(counts) == set(workflow.STATES) and counts["running"] == 2 and counts["waiting"] == 0


@pytest.mark.parametrize(
    ("parallelism", "in_slot", "waiting", "room"),
    [(None, 0, 7, 7), (5, 0, 100, 5), (5, 3, 100, 2), (5, 5, 100, 0), (5, 6, 100, 0), (5, 0, 2, 2)],
)
def test_room_is_what_parallelism_leaves(parallelism, in_slot, waiting, room):
    assert workflow.room(parallelism=parallelism, in_slot=in_slot, waiting=waiting) == room


def test_a_new_array_queues_its_lowest_indices_up_to_parallelism():
    assert workflow.initially_queued(count=100, parallelism=5, held=False) == 5
    assert workflow.initially_queued(count=3, parallelism=5, held=False) == 3
    assert workflow.initially_queued(count=100, parallelism=None, held=False) == 100
    assert workflow.initially_queued(count=100, parallelism=5, held=True) == 0


def _graph(edges: dict):
    asked = []

    def parents(nodes):
        asked.append(set(nodes))
        return {n: edges.get(n, []) for n in nodes}

    return parents, asked


def test_a_self_dependency_is_a_cycle():
    parents, _ = _graph({})
    assert workflow.find_cycle(("job", 1), [("job", 1)], parents) == [("job", 1), ("job", 1)]


def test_a_cycle_through_ancestors_is_found_with_its_path():
    # 3 waits on 2, 2 waits on array 7, array 7 waits on job 1; now 1 would wait on 3.
    edges = {("job", 3): [("job", 2)], ("job", 2): [("array", 7)], ("array", 7): [("job", 1)]}
    parents, _ = _graph(edges)
    path = workflow.find_cycle(("job", 1), [("job", 3)], parents)
    assert path == [("job", 1), ("job", 3), ("job", 2), ("array", 7), ("job", 1)]


def test_no_cycle_in_a_diamond_and_each_ancestor_is_read_once():
    edges = {("job", 2): [("job", 1)], ("job", 3): [("job", 1)], ("job", 1): []}
    parents, asked = _graph(edges)
    assert workflow.find_cycle(("job", 9), [("job", 2), ("job", 3)], parents) is None
    seen = [n for level in asked for n in level]
    assert len(seen) == len(set(seen)) == 3


def test_a_task_waiting_on_its_own_array_is_a_cycle():
    # An array task waits on its array; an array that waits on one of its tasks is a cycle.
    parents, _ = _graph({("job", 40): [("array", 4)]})
    assert workflow.find_cycle(("array", 4), [("job", 40)], parents) == [("array", 4), ("job", 40), ("array", 4)]


def test_pending_reason_names_what_it_waits_for():
    reason = workflow.pending_reason([(("job", 12), "succeeded"), (("array", 3), "ended")])
    assert reason == "waiting for job 12 to succeed, array 3 to end"
    assert workflow.pending_reason([]) == ""
