"""The reliability score: one test per input (pure), the figures read from Euler's records, and placement."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from jobs.scheduling import filters, scores
from jobs.scheduling.snapshots import JobSnapshot, NodeSnapshot
from lending.reliability import Record, online_seconds, score

DAY = 86_400.0
STEADY = Record(observed_seconds=DAY, online_seconds=DAY, hours_run=10, lost=0, reclaims=0, gpu_faults=0,
                heartbeat_gaps=0)  # fmt: skip


def _replace(**over) -> Record:
    return replace(STEADY, **over)


def test_a_steady_node_scores_100():
    assert score(STEADY) == 100.0


def test_time_offline_lowers_it_in_proportion():
    assert score(_replace(online_seconds=DAY / 2)) == 50.0


def test_lost_attempts_count_per_hour_run():
    assert score(_replace(lost=1, hours_run=10)) < 100.0
    assert score(_replace(lost=1, hours_run=1)) < score(_replace(lost=1, hours_run=10))  # same loss, less work
    assert score(_replace(lost=1, hours_run=0)) == score(_replace(lost=1, hours_run=1))  # at least an hour counts


def test_reclaims_gpu_faults_and_heartbeat_gaps_each_lower_it():
    for field in ("reclaims", "gpu_faults", "heartbeat_gaps"):
        one, two = score(_replace(**{field: 1})), score(_replace(**{field: 2}))
        assert 100.0 > one > two, field


def test_a_node_with_no_record_scores_by_its_online_time():
    assert score(_replace(observed_seconds=0, online_seconds=0, hours_run=0)) == 100.0


def test_online_time_is_read_from_the_flips():
    t0 = datetime(2026, 12, 1, tzinfo=UTC)
    hour = timedelta(hours=1)
    flips = [(t0 + hour, False), (t0 + 3 * hour, True)]
    assert online_seconds(start=t0, end=t0 + 4 * hour, flips=flips, online_now=True) == 2 * 3600
    assert online_seconds(start=t0, end=t0 + 4 * hour, flips=[], online_now=False) == 0
    assert online_seconds(start=t0, end=t0 + 4 * hour, flips=[(t0 + hour, True)], online_now=True) == 3 * 3600


def test_min_reliability_is_a_filter_with_its_own_reason():
    job = JobSnapshot(id=1, project_id=1, cpu_milli=1, memory_bytes=1, min_reliability=90)
    assert filters.reliability(NodeSnapshot(id=1, reliability=89.9), job) == "reliability"
    assert filters.reliability(NodeSnapshot(id=1, reliability=None), job) == "reliability"  # not scored yet
    assert filters.reliability(NodeSnapshot(id=1, reliability=90.0), job) is None


def test_the_marks_that_split_node_classes_are_only_those_the_queue_needs():
    short = JobSnapshot(id=1, project_id=1, cpu_milli=1, memory_bytes=1, timeout_seconds=60)
    long_ = JobSnapshot(id=2, project_id=1, cpu_milli=1, memory_bytes=1, timeout_seconds=scores.LONG_JOB_SECONDS)
    picky = JobSnapshot(id=3, project_id=1, cpu_milli=1, memory_bytes=1, min_reliability=70)
    assert scores.reliability_marks([short]) == ()
    assert scores.reliability_marks([short, long_, picky]) == (70.0, scores.PREFERRED_RELIABILITY)


@pytest.mark.django_db
def test_a_node_that_loses_3_of_10_attempts_scores_below_one_that_loses_none_and_min_reliability_avoids_it(
    project, api, make_user, lent_node, running_attempt
):
    from jobs import attempts
    from jobs.models import Job
    from jobs.scheduling import cycle
    from lending import reliability
    from nodes.models import Node

    lender = make_user("lena")
    now = timezone.now()
    flaky = lent_node(lender, name="flaky", approved_at=now - timedelta(days=20))
    steady = lent_node(lender, name="steady", approved_at=now - timedelta(days=20))
    for node in (flaky, steady):
        for i in range(10):
            a = running_attempt(project, node, seconds=600)
            outcome = "lost" if node is flaky and i < 3 else "succeeded"
            with transaction.atomic():
                attempts.end_attempt(
                    a.pk, a.job_id, outcome=outcome, reason=outcome.replace("succeeded", "exited"), now=now
                )
    Job.objects.all().update(state="succeeded")
    assert reliability.refresh(now=now) == 2
    flaky.refresh_from_db()
    steady.refresh_from_db()
    assert flaky.reliability < steady.reliability == 100.0
    body = {"name": "p", "image": "euler-test/busybox", "command": ["true"], "cpu_milli": 100,
            "memory_bytes": 64 << 20, "timeout_seconds": 60}  # fmt: skip
    Node.objects.filter(pk=steady.pk).update(online=False)
    r = api.post("/api/v1/jobs", {**body, "min_reliability": 90}, format="json")
    assert r.status_code == 201, r.content
    cycle.one_pass()
    job = Job.objects.get(pk=r.json()["id"])
    assert job.state == "queued"
    assert job.pending_reason == "no node fits: 1 are offline, 1 score below the job's min_reliability"
    Node.objects.filter(pk=steady.pk).update(online=True)
    cycle.one_pass()
    job.refresh_from_db()
    assert job.current_attempt.node_name == "steady"


@pytest.mark.django_db
def test_a_long_job_prefers_the_reliable_node_where_spread_alone_would_pick_the_other(
    project, api, make_user, lent_node
):
    from jobs.models import Job
    from jobs.scheduling import cycle

    lender = make_user("lena")
    lent_node(lender, name="roomy-flaky", cpu_milli=64000, reliability=50.0)
    lent_node(lender, name="small-steady", cpu_milli=2000, reliability=99.0)
    body = {"name": "p", "image": "euler-test/busybox", "command": ["true"], "cpu_milli": 100,
            "memory_bytes": 64 << 20}  # fmt: skip
    short = api.post("/api/v1/jobs", {**body, "timeout_seconds": 60}, format="json").json()["id"]
    long_ = api.post("/api/v1/jobs", {**body, "timeout_seconds": 4 * 3600}, format="json").json()["id"]
    cycle.one_pass()
    placed = {j.pk: j.current_attempt.node_name for j in Job.objects.select_related("current_attempt")}
    assert placed == {short: "roomy-flaky", long_: "small-steady"}


@pytest.mark.django_db
@pytest.mark.parametrize("value", [-1, 100.5, "high", True])
def test_min_reliability_is_validated(api, value):
    body = {"name": "p", "image": "euler-test/busybox", "command": ["true"], "cpu_milli": 100,
            "memory_bytes": 64 << 20, "timeout_seconds": 60, "min_reliability": value}  # fmt: skip
    r = api.post("/api/v1/jobs", body, format="json")
    assert (r.status_code, r.json()["code"]) == (400, "invalid_min_reliability")


@pytest.mark.django_db
def test_a_reclaim_and_a_windows_end_count_as_reclaims_but_a_preemption_counts_against_no_machine(
    project, make_user, lent_node, running_attempt
):
    from jobs import attempts
    from jobs.models import Attempt
    from lending import reliability
    from lending.models import LedgerEntry

    now = timezone.now()
    node = lent_node(make_user("rhea"), name="rec", approved_at=now - timedelta(days=20))
    for stop in ("reclaim", "window_closed", "preempt"):  # each stop as jobs.stopping records it, then the end
        a = running_attempt(project, node, seconds=600)
        Attempt.objects.filter(pk=a.pk).update(stop_reason=stop, stop_requeue=True)
        with transaction.atomic():
            attempts.end_attempt(a.pk, a.job_id, outcome="failed", reason="exited", exit_code=143, now=now)
    ended = sorted(LedgerEntry.objects.filter(node=node).values_list("outcome", "reason"))
    assert ended == [("preempted", "preempted"), ("preempted", "window_closed"), ("reclaimed", "reclaimed")]
    assert reliability.record_for(node, now=now).reclaims == 2
