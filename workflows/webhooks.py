"""Webhooks: register (owner-only, secret shown once), delete, redeliver, and the deliveries' bookkeeping."""

from __future__ import annotations

import uuid

from django.db import transaction
from django.utils import timezone

import audit
from euler.errors import InvalidInput
from quotas import scoped
from workflows import events, signing
from workflows.destinations import check_destination
from workflows.models import Delivery, Webhook

MAX_HOOKS = 20  # per project


def get_hook(*, project, hook_id: int) -> Webhook:
    return scoped.webhook(project=project, hook_id=hook_id)


@transaction.atomic
def webhook_create(*, project, url: str, event_names, description: str = "", by=None) -> tuple[Webhook, str]:
    """A new hook and its signing secret (returned once; stored AES-GCM encrypted)."""
    try:
        names = events.normalize(event_names)
    except events.EventError as exc:
        raise InvalidInput(str(exc), code=exc.code) from None
    check_destination(url)
    if Webhook.objects.filter(project=project).count() >= MAX_HOOKS:
        raise InvalidInput(f"A project has at most {MAX_HOOKS} webhooks.", code="too_many_webhooks")
    secret = signing.new_secret()
    hook = Webhook.objects.create(
        project=project, url=url, events=names, secret=secret, description=description, created_by=by
    )
    audit.record("webhook.created", project=project, target=f"webhook:{hook.pk}",
                 details={"url": url, "events": names}, by=by)  # fmt: skip
    return hook, secret


@transaction.atomic
def webhook_delete(*, hook: Webhook, by=None) -> None:
    audit.record("webhook.deleted", project=hook.project, target=f"webhook:{hook.pk}", details={"url": hook.url}, by=by)
    hook.delete()


def get_delivery(*, hook: Webhook, delivery_id: int) -> Delivery:
    return scoped.delivery(hook=hook, delivery_id=delivery_id)


@transaction.atomic
def redeliver(*, delivery: Delivery, by=None) -> Delivery:
    """A new delivery of the same payload (its own tries and log), sent at once."""
    from workflows import tasks

    copy = Delivery.objects.create(
        hook=delivery.hook,
        key=f"redeliver:{delivery.pk}:{uuid.uuid4().hex[:12]}",
        event_type=delivery.event_type,
        payload=delivery.payload,
        next_attempt_at=timezone.now(),
        redelivery_of=delivery,
    )
    audit.record("webhook.redelivered", project=delivery.hook.project, target=f"webhook:{delivery.hook_id}",
                 details={"delivery": delivery.pk, "new_delivery": copy.pk}, by=by)  # fmt: skip
    transaction.on_commit(tasks.pump_soon)
    return copy
