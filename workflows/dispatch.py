"""The job event stream turned into webhook deliveries (an outbox read by one dispatcher at a time).

Every JobEvent (submission, each state change, array tasks' too: they are jobs) is read once in id order from
a cursor. Ids are handed out before commit, so an event may become visible after a larger one: the cursor
only moves past events older than SETTLE seconds, the newer ones are read again on the next run, and the
unique (hook, key) constraint keeps each event's delivery single. Hooks see events created after them.
"""

from __future__ import annotations

from datetime import timedelta

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from jobs.models import JobEvent
from workflows import events
from workflows.models import Delivery, DeliveryState, DispatchCursor, Webhook

SETTLE = timedelta(seconds=30)
BATCH = 2000


def _job_summary(job) -> dict:
    return {"id": job.pk, "name": job.name, "state": job.state, "exit_code": job.exit_code, "reason": job.reason}


def _payload(event: JobEvent, slug: str) -> dict:
    return events.payload(
        event_id=event.pk,
        project=slug,
        job=_job_summary(event.job),
        event={
            "from_state": event.from_state,
            "to_state": event.to_state,
            "reason": event.reason,
            "message": event.message,
            "attempt": event.attempt_id,
        },  # fmt: skip
        created_at=event.created_at.isoformat(),
    )


def dispatch(*, now=None) -> list[int]:
    """New deliveries for new job events; returns their ids (the caller sends them after commit)."""
    now = now or timezone.now()
    with transaction.atomic():
        if not DispatchCursor.objects.filter(pk=1).exists():
            DispatchCursor.objects.bulk_create([DispatchCursor(pk=1)], ignore_conflicts=True)
        cursor = DispatchCursor.objects.select_for_update(skip_locked=True).filter(pk=1).first()
        if cursor is None:
            return []  # another dispatcher holds it
        hooks = list(Webhook.objects.filter(enabled=True).select_related("project"))
        if not hooks:
            latest = JobEvent.objects.aggregate(m=Max("id"))["m"] or 0
            DispatchCursor.objects.filter(pk=1).update(last_event_id=max(cursor.last_event_id, latest))
            return []
        by_project: dict[int, list[Webhook]] = {}
        for hook in hooks:
            by_project.setdefault(hook.project_id, []).append(hook)
        rows = list(
            JobEvent.objects.filter(id__gt=cursor.last_event_id)
            .filter(job__project_id__in=list(by_project))
            .select_related("job")
            .order_by("id")[:BATCH]
        )
        wanted: list[Delivery] = []
        for event in rows:
            for hook in by_project[event.job.project_id]:
                if event.created_at >= hook.created_at and events.matches(hook.events, event.to_state):
                    wanted.append(Delivery(hook=hook, key=f"event:{event.pk}", event_type=events.event_type(event.to_state),
                                           payload=_payload(event, hook.project.slug), next_attempt_at=now))  # fmt: skip
        created: list[int] = []
        if wanted:
            keys = {d.key for d in wanted}
            seen = set(Delivery.objects.filter(hook__in=hooks, key__in=keys).values_list("hook_id", "key"))
            fresh = [d for d in wanted if (d.hook_id, d.key) not in seen]
            Delivery.objects.bulk_create(fresh, ignore_conflicts=True)
            created = list(
                Delivery.objects.filter(
                    hook__in=hooks, key__in={d.key for d in fresh}, attempts=0, state=DeliveryState.PENDING
                )
                .order_by("id")
                .values_list("id", flat=True)
            )
        settled = [e.pk for e in rows if e.created_at <= now - SETTLE]
        if len(rows) == BATCH:
            settled = [rows[-1].pk] if not settled else settled
        if settled:
            DispatchCursor.objects.filter(pk=1).update(last_event_id=max(cursor.last_event_id, max(settled)))
        elif not rows:
            # nothing for any hooked project: skip ahead over other projects' events, less the settle window
            old = JobEvent.objects.filter(id__gt=cursor.last_event_id, created_at__lte=now - SETTLE)
            latest = old.aggregate(m=Max("id"))["m"]
            if latest:
                DispatchCursor.objects.filter(pk=1).update(last_event_id=latest)
    return created


def overdue(*, now=None, limit: int = 500) -> list[int]:
    """Deliveries whose next try is due but whose message was lost (a worker restart): sent again, each at most
    once a minute, so a backed-up queue is not flooded with copies (a copy finds the delivery claimed anyway)."""
    now = now or timezone.now()
    Delivery.objects.filter(state=DeliveryState.SENDING, updated_at__lt=now - timedelta(minutes=5)).update(
        state=DeliveryState.PENDING, updated_at=now - timedelta(minutes=1)
    )
    due = Delivery.objects.filter(
        state=DeliveryState.PENDING,
        next_attempt_at__lte=now - timedelta(seconds=30),
        updated_at__lte=now - timedelta(seconds=60),
    )
    ids = list(due.order_by("next_attempt_at").values_list("id", flat=True)[:limit])
    Delivery.objects.filter(pk__in=ids).update(updated_at=now)
    return ids


def prune(*, days: int, now=None, batch: int = 500) -> int:
    """Ended deliveries older than `days` leave the log (their tries with them), a batch per transaction."""
    if days <= 0:
        return 0
    cutoff = (now or timezone.now()) - timedelta(days=days)
    old = Delivery.objects.filter(created_at__lt=cutoff, state__in=[DeliveryState.SUCCEEDED, DeliveryState.FAILED])
    removed = 0
    while True:
        ids = list(old.order_by("id").values_list("id", flat=True)[:batch])
        if not ids:
            return removed
        removed += Delivery.objects.filter(pk__in=ids).delete()[1].get("workflows.Delivery", 0)
