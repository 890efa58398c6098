"""Retention by beat: old ended jobs (with attempts, events, logs), node events and audit events go, in batches;
time is moved by passing `now`, never slept."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from audit.models import AuditEvent
from euler import retention, tasks
from jobs import logstore
from jobs import tasks as jobs_tasks
from jobs.models import Attempt, Job, JobEvent, LogArchive, LogChunk
from nodes.models import Node, NodeEvent

pytestmark = pytest.mark.django_db

DAY = timedelta(days=1)


def make_job(project, *, state="succeeded", ended_days_ago: float | None = 0) -> Job:
    now = timezone.now()
    ended = now - DAY * ended_days_ago if ended_days_ago is not None else None
    job = Job.objects.create(
        project=project,
        name="hello",
        image="alpine:3.20",
        command=["echo", "hi"],
        cpu_milli=100,
        memory_bytes=64 << 20,
        timeout_seconds=60,
        state=state,
        queued_at=now,
        ended_at=ended,
    )
    attempt = Attempt.objects.create(
        job=job, number=1, cpu_milli=100, memory_bytes=64 << 20, state="succeeded", ended_at=ended
    )
    job.current_attempt = attempt
    job.save(update_fields=["current_attempt"])
    JobEvent.objects.create(job=job, attempt=attempt, from_state="running", to_state=state)
    LogChunk.objects.create(attempt=attempt, seq=0, offset=0, stream="stdout", data="hi\n")
    return job


def test_cutoff_is_now_minus_days_and_zero_keeps_everything():
    now = timezone.now()
    assert retention.cutoff(now, 30) == now - 30 * DAY
    assert retention.cutoff(now, 0) is None


def test_ended_jobs_past_retention_go_with_their_attempts_events_and_logs(project, settings):
    settings.EULER_JOB_RETENTION_DAYS = 30
    old = make_job(project)
    archived = make_job(project)
    logstore.compact_attempt(archived.current_attempt_id)
    recent = make_job(project)
    queued = make_job(project, state="queued", ended_days_ago=None)
    Job.objects.filter(pk__in=[old.pk, archived.pk]).update(ended_at=timezone.now() - 3 * DAY)
    done = retention.purge_expired(now=timezone.now() + 28 * DAY)  # old and archived are 31 days ended
    assert done["jobs"] == 2
    assert set(Job.objects.values_list("pk", flat=True)) == {recent.pk, queued.pk}
    gone = [old.pk, archived.pk]
    assert not Attempt.objects.filter(job_id__in=gone).exists()
    assert not JobEvent.objects.filter(job_id__in=gone).exists()
    assert not LogChunk.objects.filter(attempt__job_id__in=gone).exists()
    assert not LogArchive.objects.exists()
    assert LogChunk.objects.filter(attempt__job_id=recent.pk).count() == 1


def test_a_queued_job_is_never_removed_however_old(project, settings):
    settings.EULER_JOB_RETENTION_DAYS = 1
    queued = make_job(project, state="queued", ended_days_ago=None)
    retention.purge_expired(now=timezone.now() + 400 * DAY)
    assert Job.objects.filter(pk=queued.pk).exists()


def test_it_works_in_batches_until_nothing_is_left(project, settings):
    settings.EULER_RETENTION_BATCH = 2
    for _ in range(5):
        make_job(project)
    assert retention.purge_expired(now=timezone.now() + 31 * DAY)["jobs"] == 5
    assert not Job.objects.exists()


def test_node_events_past_job_retention_go_and_the_node_stays(settings):
    settings.EULER_JOB_RETENTION_DAYS = 30
    node = Node.objects.create(name="n-ret")
    NodeEvent.objects.create(node=node, kind="enrolled")
    assert retention.purge_expired(now=timezone.now() + 29 * DAY)["node_events"] == 0
    assert retention.purge_expired(now=timezone.now() + 31 * DAY)["node_events"] == 1
    assert Node.objects.filter(pk=node.pk).exists() and not NodeEvent.objects.exists()


def test_audit_events_past_their_retention_go(project, settings):
    settings.EULER_AUDIT_RETENTION_DAYS = 365
    now = timezone.now()
    old = AuditEvent.objects.create(action="job.retried", actor="system", project=project, created_at=now - 366 * DAY)
    young = AuditEvent.objects.create(action="job.retried", actor="system", project=project, created_at=now - 364 * DAY)
    assert retention.purge_expired(now=now)["audit_events"] == 1
    assert list(AuditEvent.objects.values_list("pk", flat=True)) == [young.pk]
    assert not AuditEvent.objects.filter(pk=old.pk).exists()


def test_zero_days_keeps_everything(project, settings):
    settings.EULER_JOB_RETENTION_DAYS = 0
    settings.EULER_AUDIT_RETENTION_DAYS = 0
    settings.EULER_SCHEDULE_RUN_RETENTION_DAYS = 0
    make_job(project)
    AuditEvent.objects.create(action="job.retried", actor="system", project=project)
    assert retention.purge_expired(now=timezone.now() + 10_000 * DAY) == {
        "jobs": 0,
        "node_events": 0,
        "audit_events": 0,
        "schedule_runs": 0,
    }
    assert Job.objects.count() == 1 and AuditEvent.objects.count() == 1


def test_the_beat_tasks_are_scheduled_and_run(settings, project):
    assert settings.CELERY_BEAT_SCHEDULE["euler-purge-expired"]["task"] == tasks.purge_expired.name
    assert settings.CELERY_BEAT_SCHEDULE["euler-compact-logs"]["task"] == jobs_tasks.compact_logs.name
    tasks.purge_expired()
    jobs_tasks.compact_logs()
