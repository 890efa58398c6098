"""Celery tasks of the project as a whole (not of one app): retention over what the apps registered."""

from __future__ import annotations

from celery import shared_task


@shared_task(name="euler.tasks.purge_expired", ignore_result=True)
def purge_expired() -> None:
    from euler import retention

    retention.purge_expired()
