"""Celery tasks of schedules and webhooks: each takes ids (or nothing) and calls one domain function."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from workflows import delivery, dispatch, nudge, schedules

DELIVER = "workflows.tasks.webhook_deliver"


@shared_task(name="workflows.tasks.schedule_tick", ignore_result=True)
def schedule_tick() -> None:
    schedules.run_due(budget=settings.EULER_SCHEDULE_PASS_SECONDS)


@shared_task(name="workflows.tasks.webhook_dispatch", ignore_result=True)
def webhook_dispatch() -> None:
    """Beat's pass, or one asked for by new job events (queue `dispatch`, workflows/nudge.py): new job events into
    deliveries, then the due ones to the senders."""
    nudge.pass_started()
    dispatch.dispatch()
    webhook_pump()


@shared_task(name="workflows.tasks.webhook_pump", ignore_result=True)
def webhook_pump() -> None:
    """Due deliveries to the senders, one batch per project (queue `dispatch`): after a pass, and after a batch
    ends, so that a project's next batch need not wait for beat."""
    for batch in dispatch.claim():
        webhook_deliver.apply_async((batch,))


@shared_task(name="workflows.tasks.prune_deliveries", ignore_result=True)
def prune_deliveries() -> None:
    dispatch.prune(days=settings.EULER_WEBHOOK_LOG_DAYS)


@shared_task(name=DELIVER, ignore_result=True)
def webhook_deliver(batch) -> None:
    """One batch of one project (queue `webhooks`): [(delivery id, attempt number)], sent concurrently."""
    if delivery.deliver_batch([tuple(pair) for pair in batch]):
        webhook_pump.apply_async()


def pump_soon() -> None:
    webhook_pump.apply_async()
