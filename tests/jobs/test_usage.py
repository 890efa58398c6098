"""Job usage in the ledger and the budget check at submit."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from jobs import budgets, usage
from jobs.models import Attempt

from .conftest import GIB, seed_body


def test_seconds_are_split_by_utc_day():
    start = datetime(2026, 3, 1, 23, 59, 30, tzinfo=UTC)
    assert usage.split_by_day(start, start + timedelta(seconds=90)) == [
        (date(2026, 3, 1), 30.0),
        (date(2026, 3, 2), 60.0),
    ]
    assert usage.split_by_day(start, start) == []


def test_amounts_count_cores_and_gpus():
    assert usage.attempt_amounts(cpu_milli=500, gpu_count=0, seconds=10) == {"cpu_core_seconds": 5.0}
    assert usage.attempt_amounts(cpu_milli=2000, gpu_count=2, seconds=10) == {
        "cpu_core_seconds": 20.0,
        "gpu_seconds": 20.0,
    }


@pytest.mark.django_db
def test_an_ended_attempt_is_booked_once(project, submit, make_node, schedule):
    from jobs import attempts
    from quotas.selectors import project_usage

    make_node()
    job = submit(cpu_milli=2000)
    schedule()
    attempt = Attempt.objects.get(job_id=job["id"])
    Attempt.objects.filter(pk=attempt.pk).update(state="running", started_at=timezone.now() - timedelta(seconds=100))
    attempts.node_lost(node_id=attempt.node_id)
    attempts.node_lost(node_id=attempt.node_id)
    used = project_usage(project)["cpu_core_seconds"]
    assert 199 < used < 202


@pytest.mark.django_db
def test_a_spent_budget_refuses_new_jobs_with_429(project, api):
    from quotas.models import Quota, UsageEntry

    Quota.objects.filter(project=project).update(cpu_core_seconds=100, gpu_seconds=0)
    assert api.post("/api/v1/jobs", seed_body(), format="json").status_code == 201
    UsageEntry.objects.create(project=project, day=timezone.now().date(), resource="cpu_core_seconds", amount=200)
    r = api.post("/api/v1/jobs", seed_body(), format="json")
    assert r.status_code == 429 and r.json()["code"] == "quota_exceeded"
    assert r.json()["resource"] == "cpu_core_seconds"
    # The project or its id (a service's update names its project by id): the same answer.
    from euler.errors import QuotaExceeded

    for who in (project, project.pk):
        with pytest.raises(QuotaExceeded):
            usage.check_budget(project=who, gpu_count=0)
    Quota.objects.filter(project=project).update(cpu_core_seconds=1000)
    usage.check_budget(project=project.pk, gpu_count=0)  # 200 of 1000: room


@pytest.mark.django_db
def test_gpu_jobs_need_gpu_budget(project, api):
    from quotas.models import Quota

    Quota.objects.filter(project=project).update(gpu_seconds=0)
    r = api.post("/api/v1/jobs", seed_body(gpu_count=1), format="json")
    assert r.status_code == 429 and r.json()["resource"] == "gpu_seconds"
    assert api.post("/api/v1/jobs", seed_body(), format="json").status_code == 201


def _running_attempt(submit, make_node, schedule, *, started_ago: float, **job) -> Attempt:
    make_node(gpus=job.get("gpu_count", 0))
    created = submit(**job)
    schedule()
    attempt = Attempt.objects.get(job_id=created["id"])
    Attempt.objects.filter(pk=attempt.pk).update(
        state="running", started_at=timezone.now() - timedelta(seconds=started_ago)
    )
    return Attempt.objects.get(pk=attempt.pk)


@pytest.mark.django_db
def test_metering_counts_each_second_once_across_replays_and_restarts(project, submit, make_node, schedule):
    from jobs import attempts
    from quotas.selectors import project_usage

    attempt = _running_attempt(submit, make_node, schedule, started_ago=0, cpu_milli=1000, gpu_count=1)
    t0 = attempt.started_at
    assert usage.meter(attempt_id=attempt.pk, until=t0 + timedelta(seconds=10)) == 10
    # The same heartbeat replayed, and an older one arriving late: nothing more is booked.
    assert usage.meter(attempt_id=attempt.pk, until=t0 + timedelta(seconds=10)) == 0
    assert usage.meter(attempt_id=attempt.pk, until=t0 + timedelta(seconds=4)) == 0
    # The agent restarts and adopts the container: heartbeats carry on from the mark.
    assert usage.meter(attempt_id=attempt.pk, until=t0 + timedelta(seconds=25)) == 15
    # The end report (and its replay) books only the rest.
    with transaction.atomic():
        attempts.end_attempt(
            attempt.pk, attempt.job_id, outcome="succeeded", reason="exited", exit_code=0,
            now=t0 + timedelta(seconds=30),
        )  # fmt: skip
    assert usage.meter(attempt_id=attempt.pk, until=t0 + timedelta(seconds=30)) == 0
    used = project_usage(project)
    assert used["cpu_core_seconds"] == pytest.approx(30)
    assert used["gpu_seconds"] == pytest.approx(30)


@pytest.mark.django_db
def test_heartbeats_accrue_usage_of_running_attempts(project, submit, make_node, schedule):
    from jobs.node_hooks import heartbeat_hook
    from nodeagent import protocol
    from quotas.selectors import project_usage

    attempt = _running_attempt(submit, make_node, schedule, started_ago=50, cpu_milli=2000)
    hb = protocol.Heartbeat(
        resources=protocol.Resources(cpu_milli=4000, memory_bytes=GIB),
        running=[protocol.RunningAttempt(attempt_id=attempt.pk, state="running")],
    )
    assert heartbeat_hook(attempt.node, hb) == []
    heartbeat_hook(attempt.node, hb)  # replayed
    assert 99 < project_usage(project)["cpu_core_seconds"] < 102


@pytest.mark.django_db
def test_a_heartbeat_soon_after_the_last_mark_books_nothing_and_queries_no_usage(
    project, submit, make_node, schedule, django_assert_max_num_queries
):
    from jobs.node_hooks import heartbeat_hook
    from nodeagent import protocol
    from quotas.selectors import project_usage

    attempt = _running_attempt(submit, make_node, schedule, started_ago=5, cpu_milli=2000)
    hb = protocol.Heartbeat(
        resources=protocol.Resources(cpu_milli=4000, memory_bytes=GIB),
        running=[protocol.RunningAttempt(attempt_id=attempt.pk, state="running")],
    )
    node = attempt.node
    with django_assert_max_num_queries(2):  # the listed attempts, the unlisted ones: no metering
        assert heartbeat_hook(node, hb) == []
    assert project_usage(project)["cpu_core_seconds"] == 0


@pytest.mark.django_db
def test_running_jobs_are_stopped_once_usage_passes_the_budget_and_grace(project, submit, make_node, schedule):
    from jobs.models import Job
    from quotas.models import Quota

    Quota.objects.filter(project=project).update(cpu_core_seconds=100)
    attempt = _running_attempt(submit, make_node, schedule, started_ago=104, cpu_milli=1000)
    assert budgets.enforce_budgets() == 0  # 104 s used of 100: within the 5% grace
    Attempt.objects.filter(pk=attempt.pk).update(started_at=attempt.started_at - timedelta(seconds=10))
    Attempt.objects.filter(pk=attempt.pk).update(metered_until=None)
    assert budgets.enforce_budgets() == 1
    attempt.refresh_from_db()
    # Stopped with its grace (jobs/stopping.py): it holds its node until the node says the container is gone.
    assert (attempt.state, attempt.stop_reason, attempt.stop_failure) == ("running", "quota_exceeded", True)
    assert budgets.enforce_budgets() == 0  # asked once
    from jobs import attempts

    assert attempts.attempt_gone(attempt_id=attempt.pk)
    attempt.refresh_from_db()
    assert (attempt.state, attempt.reason) == ("failed", "quota_exceeded")
    assert Job.objects.get(pk=attempt.job_id).state == "failed"
