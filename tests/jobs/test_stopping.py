"""Every stop has a grace (jobs/stopping.py): the pure decisions, and the one door that records a stop."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from jobs import stopping
from jobs.models import Attempt, Job, JobEvent
from jobs.states import AttemptState

RECLAIM = stopping.Stop(reason="reclaim", requeue=True, by="lender")
CANCEL = stopping.Stop(reason="cancelled")
BUDGET = stopping.Stop(reason="quota_exceeded", failure=True)


def test_a_reclaimed_attempt_ends_reclaimed_whatever_its_node_reports():
    for outcome, reason in (("failed", "exited"), ("cancelled", "cancelled"), ("lost", "lost"), ("failed", "oom")):
        assert stopping.ending(stop=RECLAIM, outcome=outcome, reason=reason) == ("reclaimed", "reclaimed")


def test_a_preempted_attempt_ends_preempted():
    stop = stopping.Stop(reason="preempt", requeue=True)
    assert stopping.ending(stop=stop, outcome="lost", reason="lost") == ("preempted", "preempted")


def test_a_job_that_finished_before_its_stop_succeeded():
    assert stopping.ending(stop=RECLAIM, outcome="succeeded", reason="exited") == ("succeeded", "exited")


def test_a_failure_stop_fails_with_its_own_reason():
    assert stopping.ending(stop=BUDGET, outcome="cancelled", reason="cancelled") == ("failed", "quota_exceeded")


def test_a_cancel_ends_cancelled_and_no_stop_changes_nothing():
    assert stopping.ending(stop=CANCEL, outcome="failed", reason="exited") == ("cancelled", "cancelled")
    assert stopping.ending(stop=None, outcome="lost", reason="lost") == ("lost", "lost")


def test_stops_recorded_before_the_flags_keep_their_failure():
    assert stopping.stop_of({"stop_reason": "timeout"}).failure
    assert stopping.stop_of({"stop_reason": ""}) is None


def test_the_grace_is_the_asked_one_else_the_jobs_capped_by_the_operator(settings):
    settings.EULER_MAX_STOP_GRACE = 100
    assert stopping.clamp_grace(None, job_grace=30) == 30
    assert stopping.clamp_grace(5, job_grace=30) == 5
    assert stopping.clamp_grace(500, job_grace=30) == 100
    assert stopping.clamp_grace(-1, job_grace=30) == 0


def test_a_stops_deadline_only_moves_earlier(settings):
    settings.EULER_JOB_TIMEOUT_GRACE = 60
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert stopping.stop_deadline(now=now, grace=30, current=None) == now + timedelta(seconds=90)
    assert stopping.stop_deadline(now=now, grace=30, current=now + timedelta(seconds=10)) == now + timedelta(seconds=10)


def test_a_requeue_without_failure_needs_a_known_outcome():
    with pytest.raises(ValueError):
        stopping.request_stop(Attempt(), reason="whim", requeue=True, count_as_failure=False)


def _running(submit, make_node, schedule, **job) -> Attempt:
    make_node()
    created = submit(**job)
    schedule()
    attempt = Attempt.objects.get(job_id=created["id"])
    Attempt.objects.filter(pk=attempt.pk).update(state="running", started_at=timezone.now())
    Job.objects.filter(pk=attempt.job_id).update(state="running")
    return Attempt.objects.select_related("job").get(pk=attempt.pk)


def _stop(attempt: Attempt, **kw) -> bool:
    from jobs import transitions

    with transaction.atomic():
        attempt.job = transitions.lock(attempt.job_id)
        return stopping.request_stop(attempt, **kw)


@pytest.mark.django_db
def test_a_reclaim_requeues_the_job_without_spending_a_retry(project, submit, make_node, schedule):
    from jobs import attempts
    from jobs.node_hooks import poll_provider

    attempt = _running(submit, make_node, schedule, stop_grace_seconds=12)
    assert _stop(attempt, reason="reclaim", requeue=True, count_as_failure=False, by="olivia")
    assert not _stop(attempt, reason="preempt", requeue=True, count_as_failure=False)  # the first stop wins
    row = Attempt.objects.get(pk=attempt.pk)
    assert (row.state, row.stop_reason, row.stop_grace, row.stop_requeue) == ("running", "reclaim", 12, True)
    work = poll_provider(row.node)
    assert [(c.reason, c.grace) for c in work[1]] == [("reclaim", 12)]
    # The node stopped it and reported a plain exit (SIGTERM → exit 143): the stop decides.
    with transaction.atomic():
        assert attempts.end_attempt(
            attempt.pk, attempt.job_id, outcome="failed", reason="exited", exit_code=143, now=timezone.now()
        )
    row.refresh_from_db()
    job = Job.objects.get(pk=attempt.job_id)
    assert (row.state, row.reason, row.stop_reason) == (AttemptState.RECLAIMED, "reclaimed", "reclaim")
    assert (job.state, job.retries_used, job.current_attempt_id) == ("queued", 0, None)
    assert "reclaim" in job.pending_reason
    reasons = list(JobEvent.objects.filter(job=job).values_list("reason", flat=True))
    assert "stop_requested" in reasons and "reclaimed" in reasons


@pytest.mark.django_db
def test_a_reclaimed_attempt_whose_node_is_lost_is_still_requeued_without_a_retry(project, submit, make_node, schedule):
    from jobs import attempts

    attempt = _running(submit, make_node, schedule, max_retries=0)
    assert _stop(attempt, reason="reclaim", requeue=True, count_as_failure=False)
    assert attempts.node_lost(node_id=attempt.node_id) == 1
    job = Job.objects.get(pk=attempt.job_id)
    assert (Attempt.objects.get(pk=attempt.pk).state, job.state, job.retries_used) == ("reclaimed", "queued", 0)


@pytest.mark.django_db
def test_a_stop_moves_the_backstop_to_grace_and_the_backstop_ends_it_as_the_stop_says(
    project, submit, make_node, schedule, settings
):
    from jobs import attempts

    settings.EULER_JOB_TIMEOUT_GRACE = 5
    attempt = _running(submit, make_node, schedule)
    now = timezone.now()
    assert _stop(attempt, reason="reclaim", requeue=True, count_as_failure=False, grace=10, now=now)
    row = Attempt.objects.get(pk=attempt.pk)
    assert row.deadline_at == now + timedelta(seconds=15)
    assert attempts.deadlines_expire(now=now + timedelta(seconds=16)) == 1
    row.refresh_from_db()
    assert (row.state, row.reason, row.stop_reason) == ("reclaimed", "reclaimed", "reclaim")
    assert Job.objects.get(pk=attempt.job_id).state == "queued"


@pytest.mark.django_db
def test_cancel_asks_the_stop_with_the_jobs_grace(project, api, submit, make_node, schedule):
    from jobs.node_hooks import poll_provider

    attempt = _running(submit, make_node, schedule, stop_grace_seconds=7)
    r = api.post(f"/api/v1/jobs/{attempt.job_id}/cancel")
    assert r.status_code == 200, r.content
    row = Attempt.objects.get(pk=attempt.pk)
    assert (row.stop_reason, row.stop_grace, row.stop_requeue, row.stop_failure) == ("cancelled", 7, False, False)
    assert [(c.reason, c.grace) for c in poll_provider(row.node)[1]] == [("cancelled", 7)]


@pytest.mark.django_db
def test_the_running_backstop_waits_for_the_timeout_and_the_grace(project, submit, make_node, schedule, settings):
    from jobs import attempts

    settings.EULER_JOB_TIMEOUT_GRACE = 5
    job = Job(timeout_seconds=100, stop_grace_seconds=20)
    assert attempts.backstop_seconds(job) == 125


@pytest.mark.django_db
def test_a_submission_over_the_operators_grace_is_refused(api, settings):
    from .conftest import seed_body

    settings.EULER_MAX_STOP_GRACE = 60
    r = api.post("/api/v1/jobs", seed_body(stop_grace_seconds=61), format="json")
    assert r.status_code == 400 and r.json()["code"] == "invalid_stop_grace"
    r = api.post("/api/v1/jobs", seed_body(warn_signal="SIGKILL"), format="json")
    assert r.status_code == 400 and r.json()["code"] == "invalid_warn_signal"
    r = api.post(
        "/api/v1/jobs",
        seed_body(stop_grace_seconds=60, warn_before_timeout_seconds=30, warn_signal="SIGUSR2"),
        format="json",
    )
    assert r.status_code == 201, r.content
    job = Job.objects.get(pk=r.json()["id"])
    assert (job.stop_grace_seconds, job.warn_before_timeout_seconds, job.warn_signal) == (60, 30, "SIGUSR2")
