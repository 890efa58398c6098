"""Celery tasks of the lending app."""

from __future__ import annotations

from celery import shared_task
from django.utils import timezone

from lending import reliability


@shared_task(name="lending.tasks.refresh_reliability", ignore_result=True)
def refresh_reliability() -> None:
    reliability.refresh(now=timezone.now())
