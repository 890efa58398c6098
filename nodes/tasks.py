"""Celery tasks of the nodes app: thin wrappers over liveness functions."""

from __future__ import annotations

from celery import shared_task

from nodes import liveness


@shared_task(name="nodes.tasks.mark_offline", ignore_result=True)
def mark_offline() -> int:
    return len(liveness.mark_offline())


@shared_task(name="nodes.tasks.flush_seen", ignore_result=True)
def flush_seen() -> int:
    return liveness.flush_seen()
