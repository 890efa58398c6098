"""Bounded data growth: old ended jobs (attempts, events, logs), node events and audit events are removed by beat.

Each kind goes in batches of EULER_RETENTION_BATCH rows, one short transaction per batch, so a purge never
holds a long lock and a web request or a scheduling pass waits at most for one batch. A job is re-checked
under a row lock (SKIP LOCKED) in its batch, so one retried meanwhile is left alone.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

log = logging.getLogger(__name__)


def cutoff(now: datetime, days: int) -> datetime | None:
    """Rows older than this go; None when retention is off (0 days)."""
    return now - timedelta(days=days) if days > 0 else None


def _purge_job_batch(before: datetime, batch: int) -> tuple[int, bool]:
    from jobs.models import Attempt, Job, JobEvent, LogArchive, LogChunk
    from jobs.states import TERMINAL

    expired = Job.objects.filter(state__in=TERMINAL, ended_at__lt=before)
    with transaction.atomic():
        ids = list(
            expired.select_for_update(skip_locked=True).order_by("ended_at", "pk").values_list("pk", flat=True)[:batch]
        )
        if not ids:
            return 0, False
        # Leaves first (single DELETEs), so the cascade below has nothing large left to collect.
        LogChunk.objects.filter(attempt__job_id__in=ids).delete()
        LogArchive.objects.filter(attempt__job_id__in=ids).delete()
        JobEvent.objects.filter(job_id__in=ids).delete()
        Job.objects.filter(pk__in=ids).update(current_attempt=None)
        Attempt.objects.filter(job_id__in=ids).delete()
        Job.objects.filter(pk__in=ids).delete()
    return len(ids), len(ids) == batch


def _purge_batch(queryset, batch: int, delete) -> tuple[int, bool]:
    with transaction.atomic():
        ids = list(queryset.order_by("created_at", "pk").values_list("pk", flat=True)[:batch])
        if ids:
            delete(ids)
    return len(ids), len(ids) == batch


def _drain(step) -> int:
    total, more = 0, True
    while more:
        done, more = step()
        total += done
    return total


def purge_jobs(*, before: datetime, batch: int) -> int:
    return _drain(lambda: _purge_job_batch(before, batch))


def purge_node_events(*, before: datetime, batch: int) -> int:
    from nodes.models import NodeEvent

    old = NodeEvent.objects.filter(created_at__lt=before)
    return _drain(lambda: _purge_batch(old, batch, lambda ids: NodeEvent.objects.filter(pk__in=ids).delete()))


def purge_audit_events(*, before: datetime, batch: int) -> int:
    from audit.models import AuditEvent

    old = AuditEvent.objects.filter(created_at__lt=before)
    return _drain(lambda: _purge_batch(old, batch, lambda ids: AuditEvent.objects.filter(pk__in=ids).purge()))


def purge_expired(now: datetime | None = None) -> dict[str, int]:
    """One retention pass over every kind; returns how many rows of each went."""
    now = now or timezone.now()
    batch = settings.EULER_RETENTION_BATCH
    done = {"jobs": 0, "node_events": 0, "audit_events": 0}
    jobs_before = cutoff(now, settings.EULER_JOB_RETENTION_DAYS)
    if jobs_before is not None:
        done["jobs"] = purge_jobs(before=jobs_before, batch=batch)
        done["node_events"] = purge_node_events(before=jobs_before, batch=batch)
    audit_before = cutoff(now, settings.EULER_AUDIT_RETENTION_DAYS)
    if audit_before is not None:
        done["audit_events"] = purge_audit_events(before=audit_before, batch=batch)
    if any(done.values()):
        log.info("retention: removed %(jobs)s jobs, %(node_events)s node events, %(audit_events)s audit events", done)
    return done
