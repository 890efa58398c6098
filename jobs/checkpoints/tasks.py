"""Celery task of checkpoints: retention (the outputs' age, EULER_OUTPUTS_RETENTION_DAYS)."""

from __future__ import annotations

from celery import shared_task

from jobs.checkpoints import retention


@shared_task(name="jobs.checkpoints.tasks.purge_expired")
def purge_expired() -> int:
    return retention.purge_expired()
