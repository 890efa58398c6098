"""Job usage in the ledger and the budget check at submit."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from django.utils import timezone

from jobs import usage
from jobs.models import Attempt

from .conftest import seed_body


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


@pytest.mark.django_db
def test_gpu_jobs_need_gpu_budget(project, api):
    from quotas.models import Quota

    Quota.objects.filter(project=project).update(gpu_seconds=0)
    r = api.post("/api/v1/jobs", seed_body(gpu_count=1), format="json")
    assert r.status_code == 429 and r.json()["resource"] == "gpu_seconds"
    assert api.post("/api/v1/jobs", seed_body(), format="json").status_code == 201
