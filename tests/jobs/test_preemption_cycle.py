"""Priority classes and preemption through the database: classes at submit and in the API, a pass that preempts (the
victim is stopped through jobs.stopping, requeued with its retries untouched, the event names its preemptor), the
claim that holds the node, and the operator's guards."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from jobs.models import Attempt, Job, JobEvent, Preemption
from jobs.scheduling import cycle

from .conftest import seed_body

pytestmark = pytest.mark.django_db


@pytest.fixture
def classes(project):
    from quotas.models import PriorityClass

    low = PriorityClass.objects.create(name="batch", value=-10, description="sweeps")
    normal = PriorityClass.objects.create(name="normal", value=0)
    high = PriorityClass.objects.create(name="urgent", value=100, description="deadlines")
    project.default_priority_class, project.max_priority_class = normal, high
    project.save()
    return {"batch": low, "normal": normal, "urgent": high}


@pytest.fixture(autouse=True)
def _guards(settings):
    settings.EULER_PREEMPT_MIN_RUN_SECONDS = 60
    settings.EULER_PREEMPT_MAX_PER_HOUR = 3
    settings.EULER_SCHEDULER_HANDOVER_WINDOW = 0


def _run(job_id: int, *, ran: float = 600.0) -> Attempt:
    """The job's attempt, started `ran` seconds ago (as its node would have reported)."""
    attempt = Attempt.objects.get(job_id=job_id)
    Attempt.objects.filter(pk=attempt.pk).update(state="running", started_at=timezone.now() - timedelta(seconds=ran))
    Job.objects.filter(pk=job_id).update(state="running")
    return Attempt.objects.get(pk=attempt.pk)


def _stopped(attempt: Attempt) -> None:
    """The node stopped the container as asked and reports it (SIGTERM: exit 143)."""
    from jobs import attempts

    with transaction.atomic():
        assert attempts.end_attempt(
            attempt.pk, attempt.job_id, outcome="failed", reason="exited", exit_code=143, now=timezone.now()
        )


def test_a_job_gets_its_projects_default_class_and_may_ask_up_to_its_maximum(api, classes):
    r = api.post("/api/v1/jobs", seed_body(), format="json")
    assert r.status_code == 201 and (r.json()["priority_class"], r.json()["priority_value"]) == ("normal", 0)
    r = api.post("/api/v1/jobs", seed_body(priority_class="urgent"), format="json")
    assert r.status_code == 201 and (r.json()["priority_class"], r.json()["priority_value"]) == ("urgent", 100)
    r = api.post("/api/v1/jobs", seed_body(priority_class="batch"), format="json")
    assert r.status_code == 201 and r.json()["priority_value"] == -10


def test_an_unknown_class_or_one_above_the_maximum_is_refused(api, project, classes):
    count = Job.objects.count()
    r = api.post("/api/v1/jobs", seed_body(priority_class="nope"), format="json")
    assert r.status_code == 400 and r.json()["code"] == "unknown_priority_class"
    r = api.post("/api/v1/jobs", seed_body(priority_class="not a name!"), format="json")
    assert r.status_code == 400 and r.json()["code"] == "invalid_priority_class"
    project.max_priority_class = None  # no maximum: up to its default
    project.save()
    r = api.post("/api/v1/jobs", seed_body(priority_class="urgent"), format="json")
    assert r.status_code == 403 and r.json()["code"] == "priority_class_not_allowed"
    r = api.post("/api/v1/jobs", seed_body(priority_class="urgent", array={"count": 3}), format="json")
    assert r.status_code == 403 and r.json()["code"] == "priority_class_not_allowed"
    assert Job.objects.count() == count  # nothing half-written


def test_without_classes_jobs_have_none(api):
    r = api.post("/api/v1/jobs", seed_body(), format="json")
    assert (r.json()["priority_class"], r.json()["priority_value"]) == ("", 0)
    r = api.post("/api/v1/jobs", seed_body(priority_class="urgent"), format="json")
    assert r.status_code == 400 and r.json()["code"] == "unknown_priority_class"


def test_the_classes_are_listed_with_what_the_project_may_ask(api, other_api, classes):
    r = api.get("/api/v1/priority-classes")
    assert r.status_code == 200
    assert [(c["name"], c["value"], c["allowed"], c["default"]) for c in r.json()] == [
        ("urgent", 100, True, False),
        ("normal", 0, True, True),
        ("batch", -10, True, False),
    ]
    r = other_api.get("/api/v1/priority-classes")  # no default, no maximum: value 0 at most
    assert [(c["name"], c["allowed"], c["default"]) for c in r.json()] == [
        ("urgent", False, False),
        ("normal", True, False),
        ("batch", True, False),
    ]


def _full_node_with_victim(make_node, other_api, submit, schedule, *, ran=600.0):
    node = make_node(cpu_milli=4000)
    victim = submit(other_api, cpu_milli=4000, max_retries=0)
    schedule()
    return node, _run(victim["id"], ran=ran)


def test_a_higher_class_job_preempts_a_running_lower_class_job_which_requeues(
    api, other_api, submit, make_node, schedule, classes
):
    node, attempt = _full_node_with_victim(make_node, other_api, submit, schedule)
    high = submit(api, cpu_milli=3000, priority_class="urgent")
    stats = cycle.one_pass()
    assert stats.preempted == 1
    row = Attempt.objects.get(pk=attempt.pk)
    assert (row.state, row.stop_reason, row.stop_requeue, row.stop_failure) == ("running", "preempt", True, False)
    assert f"job {high['id']} (priority class urgent, 100)" in row.stop_by
    preemptor = Job.objects.get(pk=high["id"])
    assert preemptor.state == "queued"
    assert preemptor.pending_reason == f"waiting for preemption: 1 lower-class job stopping on node {node.name}"
    [p] = Preemption.objects.all()
    assert (p.preemptor_id, p.victim_id, p.victim_attempt_id, p.node_id) == (high["id"], attempt.job_id, attempt.pk,
                                                                           node.pk)  # fmt: skip
    # While it stops, the preemptor asks nothing more, and a newcomer of a lower class does not take the node.
    small = submit(other_api, cpu_milli=500)
    assert cycle.one_pass().preempted == 0
    assert Preemption.objects.count() == 1
    _stopped(row)
    victim = Job.objects.get(pk=attempt.job_id)
    assert (victim.state, victim.retries_used, victim.current_attempt_id) == ("queued", 0, None)
    assert Attempt.objects.get(pk=attempt.pk).state == "preempted"
    requeued = JobEvent.objects.get(job=victim, reason="preempted")
    assert f"job {high['id']}" in requeued.message
    cycle.one_pass()
    preemptor.refresh_from_db()
    assert preemptor.state == "assigned" and preemptor.current_attempt.node_id == node.pk
    # The newcomer (500m) fits beside it; the victim (4000m) waits, and may not preempt the higher class.
    assert Job.objects.get(pk=small["id"]).state == "assigned"
    victim.refresh_from_db()
    assert victim.state == "queued" and victim.pending_reason.startswith("no node fits")
    # The victim's detail shows who preempted it.
    r = other_api.get(f"/api/v1/jobs/{victim.pk}")
    assert any(f"job {high['id']}" in e["message"] for e in r.json()["events"])


def test_the_freed_node_is_held_for_the_preemptor(api, other_api, submit, make_node, schedule, classes):
    node, attempt = _full_node_with_victim(make_node, other_api, submit, schedule)
    high = submit(api, cpu_milli=3000, priority_class="urgent")
    cycle.one_pass()
    # Another lower-class job arrives; the victim stops; in the next pass the lower-class job comes first in the
    # queue's batches (batch of one), yet the node's 3000m stay for the preemptor.
    other = submit(other_api, cpu_milli=2000)
    _stopped(Attempt.objects.get(pk=attempt.pk))
    Job.objects.filter(pk=high["id"]).update(priority_value=-100)  # let it come last in the queue's order
    cycle.one_pass(batch=1)
    assert Job.objects.get(pk=other["id"]).state == "queued"
    assert Job.objects.get(pk=high["id"]).state == "assigned"


def test_a_job_that_ran_less_than_the_minimum_is_not_preempted(api, other_api, submit, make_node, schedule, classes):
    _, attempt = _full_node_with_victim(make_node, other_api, submit, schedule, ran=10)
    high = submit(api, cpu_milli=3000, priority_class="urgent")
    assert cycle.one_pass().preempted == 0
    assert Attempt.objects.get(pk=attempt.pk).stop_reason == ""
    assert Job.objects.get(pk=high["id"]).pending_reason.startswith("no node fits")


def test_a_job_preempted_the_hourly_maximum_is_not_preempted_again_until_it_ends(
    api, other_api, submit, make_node, schedule, classes, settings
):
    settings.EULER_PREEMPT_MAX_PER_HOUR = 1
    node, attempt = _full_node_with_victim(make_node, other_api, submit, schedule)
    high = submit(api, cpu_milli=3000, priority_class="urgent", timeout_seconds=60)
    cycle.one_pass()
    _stopped(Attempt.objects.get(pk=attempt.pk))
    victim = Job.objects.get(pk=attempt.job_id)
    assert victim.preempt_immune
    cycle.one_pass()  # the preemptor runs; it ends; the victim runs again
    Job.objects.filter(pk=high["id"]).update(state="succeeded")
    Attempt.objects.filter(job_id=high["id"]).update(state="succeeded", ended_at=timezone.now())
    cycle.one_pass()
    again = _run_current(victim.pk)
    second = submit(api, cpu_milli=3000, priority_class="urgent")
    assert cycle.one_pass().preempted == 0
    assert Attempt.objects.get(pk=again.pk).stop_reason == ""
    assert Job.objects.get(pk=second["id"]).pending_reason.startswith("no node fits")


def _run_current(job_id: int) -> Attempt:
    job = Job.objects.get(pk=job_id)
    assert job.state == "assigned"
    Attempt.objects.filter(pk=job.current_attempt_id).update(
        state="running", started_at=timezone.now() - timedelta(seconds=600)
    )
    Job.objects.filter(pk=job_id).update(state="running")
    return Attempt.objects.get(pk=job.current_attempt_id)


def test_preemption_is_off_with_a_zero_hourly_maximum(api, other_api, submit, make_node, schedule, classes, settings):
    settings.EULER_PREEMPT_MAX_PER_HOUR = 0
    _, attempt = _full_node_with_victim(make_node, other_api, submit, schedule)
    submit(api, cpu_milli=3000, priority_class="urgent")
    assert cycle.one_pass().preempted == 0
    assert Attempt.objects.get(pk=attempt.pk).stop_reason == ""
