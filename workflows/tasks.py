"""Celery tasks of schedules and webhooks: each takes ids (or nothing) and calls one domain function."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from workflows import delivery, dispatch, schedules

DELIVER = "workflows.tasks.webhook_deliver"


@shared_task(name="workflows.tasks.schedule_tick", ignore_result=True)
def schedule_tick() -> None:
    schedules.run_due(limit=settings.EULER_SCHEDULE_BATCH)


@shared_task(name="workflows.tasks.webhook_dispatch", ignore_result=True)
def webhook_dispatch() -> None:
    for delivery_id in dispatch.dispatch() + dispatch.overdue():
        deliver_soon(delivery_id)


@shared_task(name="workflows.tasks.prune_deliveries", ignore_result=True)
def prune_deliveries() -> None:
    dispatch.prune(days=settings.EULER_WEBHOOK_LOG_DAYS)


@shared_task(name=DELIVER, ignore_result=True)
def webhook_deliver(delivery_id: int) -> None:
    delay = delivery.deliver(delivery_id)
    if delay is not None:
        deliver_soon(delivery_id, countdown=delay)


def deliver_soon(delivery_id: int, *, countdown: float = 0.0) -> None:
    webhook_deliver.apply_async((delivery_id,), countdown=countdown or None)
