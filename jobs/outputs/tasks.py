"""Celery task of job outputs: retention (its own schedule, EULER_OUTPUTS_RETENTION_DAYS)."""

from __future__ import annotations

from celery import shared_task

from jobs.outputs import retention


@shared_task(name="jobs.outputs.tasks.purge_expired")
def purge_expired() -> int:
    return retention.purge_expired()
