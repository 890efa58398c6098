"""Celery tasks: each takes ids (or nothing) and calls one domain function."""

from __future__ import annotations

from celery import shared_task

from euler.celerytask import note_skipped
from jobs import arrays, attempts, budgets
from jobs.scheduling import cycle
from jobs.wakeups import SCHEDULE_TASK


@shared_task(name=SCHEDULE_TASK, ignore_result=True)
def schedule(limit: int = 0) -> cycle.PassStats:
    """A scheduling pass (`limit`: none over a longer queue; jobs/wakeups.py runs it so in a web process)."""
    stats = cycle.run(limit=limit)
    if stats.busy:  # single-flight on the pass's own lock: the holder sees the dirty flag and goes again
        note_skipped(SCHEDULE_TASK, "another pass is running")
    return stats


@shared_task(name="jobs.tasks.node_lost", ignore_result=True)
def node_lost(node_id: int) -> None:
    attempts.node_lost(node_id=node_id)


@shared_task(name="jobs.tasks.sweep", ignore_result=True)
def sweep() -> None:
    """Backstops: attempts past their deadline, attempts still held by offline nodes, array slots left free."""
    attempts.deadlines_expire()
    attempts.offline_sweep()
    arrays.refill()


@shared_task(name="jobs.tasks.enforce_budgets", ignore_result=True)
def enforce_budgets() -> None:
    """Accrue running attempts' usage and stop the jobs of projects past their CPU/GPU budget."""
    budgets.enforce_budgets()


@shared_task(name="jobs.tasks.compact_logs", ignore_result=True)
def compact_logs() -> None:
    from jobs import logstore

    logstore.compact_ended()
