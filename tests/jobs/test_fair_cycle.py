"""The DB shell of fair share: priority through the API, per-project batches, weights, holdings, decayed usage."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.models import Job
from jobs.scheduling import cycle
from quotas.models import Project

pytestmark = pytest.mark.django_db
GIB = 1024**3


def test_priority_is_validated_stored_and_shown(api, submit):
    job = submit(priority=7)
    assert job["priority"] == 7
    assert submit()["priority"] == 0
    r = api.post("/api/v1/jobs", {**_body(), "priority": 101}, format="json")
    assert r.status_code == 400 and r.json()["code"] == "invalid_priority"
    r = api.post("/api/v1/jobs", {**_body(), "priority": "high"}, format="json")
    assert r.status_code == 400 and r.json()["code"] == "invalid_priority"


def _body():
    from tests.jobs.conftest import seed_body

    return seed_body()


def test_batches_hold_every_projects_next_jobs_so_a_long_backlog_does_not_fill_the_pool(
    submit, other_api, make_node, schedule
):
    make_node(cpu_milli=2000)  # room for 4 half-core jobs
    mine = [submit()["id"] for _ in range(8)]
    theirs = [submit(other_api)["id"] for _ in range(2)]
    cycle.one_pass(batch=3)  # the first batch is not all of the backlog's oldest jobs
    assigned = set(Job.objects.filter(state="assigned").values_list("id", flat=True))
    assert assigned & set(theirs) == set(theirs)
    assert len(assigned & set(mine)) == 2
    # Nobody else waits now: the backlog waits for capacity, not for its share.
    assert Job.objects.get(pk=mine[-1]).pending_reason == "no node fits: 1 lack 500 free millicores"


def test_a_weight_counts_and_holdings_come_from_active_attempts(project, other_project, submit, other_api, make_node):
    project.weight = 3
    project.save(update_fields=["weight"])
    make_node(cpu_milli=2000)
    for _ in range(4):
        submit()
    for _ in range(4):
        submit(other_api)
    cycle.one_pass()
    limits = cycle.project_limits({project.pk, other_project.pk})
    assert limits[project.pk].weight == 3
    assert limits[project.pk].held[0] == 1500 and limits[other_project.pk].held[0] == 500


def test_decayed_usage_from_the_ledger_counts_with_a_half_life(project, settings):
    from quotas.ledger import ledger_add

    now = timezone.now()
    ledger_add(project_id=project.pk, resource="cpu_core_seconds", amount=3600.0, day=(now - timedelta(days=1)).date())
    settings.EULER_FAIRSHARE_HALF_LIFE = 86400.0
    recent = cycle.project_limits({project.pk}, now=now)[project.pk].recent
    assert recent is not None and recent[0] > 0 and recent[2] == 0
    settings.EULER_FAIRSHARE_HALF_LIFE = 0.0
    assert cycle.project_limits({project.pk}, now=now)[project.pk].recent is None


def test_the_project_and_usage_show_the_weight_and_the_share(api, project, make_node, submit, schedule):
    make_node(cpu_milli=4000, memory_bytes=8 * GIB)
    submit(cpu_milli=1000, memory_bytes=GIB)
    schedule()
    Project.objects.filter(pk=project.pk).update(weight=2)
    body = api.get("/api/v1/project").json()
    assert body["weight"] == 2.0
    share = body["fair_share"]
    assert share["holds"] == 0.25 and share["share"] == 0.125 and share["dominant_resource"] == "cpu_milli"
    assert share["held"] == {"cpu_milli": 1000, "memory_bytes": GIB, "gpus": 0}
    assert share["capacity"]["cpu_milli"] == 4000
    usage = api.get("/api/v1/usage").json()
    assert usage["weight"] == 2.0 and usage["fair_share"] == share


def test_another_projects_nodes_are_not_in_the_capacity(api, other_project, make_node):
    make_node(cpu_milli=4000)
    make_node(cpu_milli=8000, trust="untrusted", owner_project=other_project)
    assert api.get("/api/v1/project").json()["fair_share"]["capacity"]["cpu_milli"] == 4000


def test_a_reservation_made_in_one_batch_holds_in_the_later_batches_of_the_pass(submit, other_api, make_node, schedule):
    make_node(cpu_milli=2000)
    running = submit(other_api, cpu_milli=1500)["id"]
    schedule()
    assert Job.objects.get(pk=running).state == "assigned"  # 500 millicores stay free
    big = submit(cpu_milli=1000)["id"]
    Job.objects.filter(pk=big).update(queued_at=timezone.now() - timedelta(hours=1))  # starved: it reserves
    small = submit(other_api, cpu_milli=500)["id"]
    cycle.one_pass(batch=1)  # the big job's batch first, then the small one's
    assert Job.objects.get(pk=big).state == "queued"
    small_job = Job.objects.get(pk=small)
    assert small_job.state == "queued", "a later batch took the capacity the starved job reserved"
    assert "reserved for an older job" in small_job.pending_reason


def test_the_share_shown_counts_recent_usage_as_the_scheduler_does(api, project, make_node, settings):
    from quotas.ledger import ledger_add

    make_node(cpu_milli=4000, memory_bytes=8 * GIB)
    assert api.get("/api/v1/project").json()["fair_share"]["share"] == 0  # nothing held, nothing used
    ledger_add(project_id=project.pk, resource="cpu_core_seconds", amount=86400.0, day=timezone.now().date())
    settings.EULER_FAIRSHARE_HALF_LIFE = 86400.0
    share = api.get("/api/v1/project").json()["fair_share"]
    assert share["holds"] == 0 and share["share"] > 0  # it holds nothing now, but it used a core today
