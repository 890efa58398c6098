"""Retention of schedule runs: once EULER_SCHEDULE_RUN_RETENTION_DAYS old (registered with euler.retention, run by
beat). A per-minute schedule writes 1,440 runs a day; the jobs they submitted follow the jobs' own retention."""

from __future__ import annotations

from datetime import datetime

from euler.retention import purge_batches
from workflows.models import ScheduleRun


def purge_schedule_runs(*, before: datetime, batch: int) -> int:
    old = ScheduleRun.objects.filter(created_at__lt=before)
    return purge_batches(old, batch, lambda ids: ScheduleRun.objects.filter(pk__in=ids).delete())
