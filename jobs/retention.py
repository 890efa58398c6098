"""Retention of ended jobs: with their attempts, events and logs, once EULER_JOB_RETENTION_DAYS old (registered
with euler.retention, run by beat)."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction

from euler.retention import drain
from jobs.models import Attempt, Job, JobEvent, LogArchive, LogChunk
from jobs.states import TERMINAL


def _purge_job_batch(before: datetime, batch: int) -> tuple[int, bool]:
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


def purge_jobs(*, before: datetime, batch: int) -> int:
    """Ended jobs that ended before `before`, a row-locked batch at a time (one retried meanwhile is left)."""
    return drain(lambda: _purge_job_batch(before, batch))
