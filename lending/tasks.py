"""Celery tasks of the lending app."""

from __future__ import annotations

from celery import shared_task
from django.utils import timezone

from lending import reliability, windows


@shared_task(name="lending.tasks.refresh_reliability", ignore_result=True)
def refresh_reliability() -> None:
    reliability.refresh(now=timezone.now())


@shared_task(name="lending.tasks.stop_at_window_end", ignore_result=True)
def stop_at_window_end() -> None:
    windows.stop_due(now=timezone.now())
