"""The job event stream turned into webhook deliveries, and deliveries handed to the senders: both in turns per
project, so that one project's flood (200,000 events, hooks that never answer) delays only itself.

Fan-out (`dispatch`): each project with enabled hooks has its own cursor over the job events. A pass shares a
budget of events among the projects (fairness.shares) and gives none to a project whose pending deliveries
reached EULER_WEBHOOK_PENDING_PER_PROJECT: its events wait, in order, until its receivers catch up (nothing is
dropped). Ids are handed out before commit, so an event may become visible after a larger one: a cursor only
moves past events older than SETTLE seconds (or past a full read); the newer ones already dispatched are read
again on the next pass without counting against the project's share, and the unique (hook, key) constraint
keeps each event's delivery single. Hooks see events created after
them.

Sending (`claim`): a project has at most one batch of at most EULER_WEBHOOK_SENDING_PER_PROJECT deliveries in
flight; a batch is sent by one task (workflows/delivery.py), its hooks concurrently and each hook's at most
PER_HOOK deliveries in order, so hooks that never answer hold one task for a few timeouts, not the queue. A batch whose message is lost goes back to pending after LOST_AFTER.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, F, Window
from django.db.models.functions import RowNumber
from django.utils import timezone

from jobs.models import JobEvent
from workflows import events, fairness
from workflows.models import Delivery, DeliveryState, DispatchCursor, Webhook

SETTLE = timedelta(seconds=30)
BUDGET = 2000  # job events read per pass, all projects together
PER_HOOK = 3  # deliveries of one hook in a batch, sent one after the other (in order): a dead receiver costs
# a batch at most PER_HOOK timeouts
LOST_AFTER = timedelta(minutes=5)  # a claimed batch not sent by then: its message was lost (a worker restart)
OPEN = (DeliveryState.PENDING, DeliveryState.SENDING)
ADVISORY_KEY = 0x45554C5257484B  # "EULRWHK": one dispatch pass at a time


def _pass_lock() -> bool:
    """The pass's lock for the transaction (PostgreSQL advisory lock; SQLite serialises writers already)."""
    if connection.vendor != "postgresql":
        return True
    with connection.cursor() as cur:
        cur.execute("SELECT pg_try_advisory_xact_lock(%s)", [ADVISORY_KEY])
        return bool(cur.fetchone()[0])


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


def wanted_events(*, hooks: int, pending: int, cap: int) -> int:
    """Events a project may have read this pass: each makes up to `hooks` deliveries, and its open deliveries
    stay under `cap` (pure)."""
    room = cap - pending
    return 0 if room <= 0 or hooks <= 0 else -(-room // hooks)


def _start_cursor(hooks: list[Webhook]) -> int:
    """A new project cursor: before the first event that its oldest hook may see."""
    since = min(h.created_at for h in hooks) - SETTLE
    before = JobEvent.objects.filter(created_at__lt=since).order_by("-id").values_list("id", flat=True).first()
    return before or 0


def _cursors(by_project: dict[int, list[Webhook]]) -> dict[int, DispatchCursor]:
    DispatchCursor.objects.exclude(project_id__in=list(by_project)).delete()  # a hook added later starts afresh
    have = {c.project_id: c for c in DispatchCursor.objects.filter(project_id__in=list(by_project))}
    new = []
    for project_id, hooks in by_project.items():
        if project_id not in have:
            start = _start_cursor(hooks)
            new.append(DispatchCursor(project_id=project_id, last_event_id=start, seen_event_id=start))
    if new:
        DispatchCursor.objects.bulk_create(new, ignore_conflicts=True)
        have = {c.project_id: c for c in DispatchCursor.objects.filter(project_id__in=list(by_project))}
    return have


def _fan_out(rows: list[JobEvent], hooks: list[Webhook], now) -> int:
    wanted = [
        Delivery(
            hook=hook,
            key=f"event:{event.pk}",
            event_type=events.event_type(event.to_state),
            payload=_payload(event, hook.project.slug),
            next_attempt_at=now,
        )  # fmt: skip
        for event in rows
        for hook in hooks
        if event.created_at >= hook.created_at and events.matches(hook.events, event.to_state)
    ]
    if not wanted:
        return 0
    seen = set(Delivery.objects.filter(hook__in=hooks, key__in={d.key for d in wanted}).values_list("hook_id", "key"))
    fresh = [d for d in wanted if (d.hook_id, d.key) not in seen]
    return len(Delivery.objects.bulk_create(fresh, ignore_conflicts=True))


def _project_pass(project_id: int, cursor: DispatchCursor, hooks: list[Webhook], share: int, now) -> int:
    """Read again the project's unsettled events (a late commit may have filled a gap), then up to `share` new
    ones; fan them out and move the cursor. Returns the deliveries made."""
    events_of = JobEvent.objects.filter(job__project_id=project_id).select_related("job").order_by("id")
    again = list(events_of.filter(id__gt=cursor.last_event_id, id__lte=cursor.seen_event_id))
    fresh = list(events_of.filter(id__gt=max(cursor.last_event_id, cursor.seen_event_id))[:share])
    rows = again + fresh
    made = _fan_out(rows, hooks, now)
    if len(fresh) == share:
        last = fresh[-1].pk  # a full read (a flood): move on, its events are all in
    else:
        unsettled = [e.pk for e in rows if e.created_at > now - SETTLE]
        last = (min(unsettled) - 1) if unsettled else (rows[-1].pk if rows else cursor.last_event_id)
    last = max(last, cursor.last_event_id)
    seen = max([cursor.seen_event_id, last, *(e.pk for e in rows)])
    if (last, seen) != (cursor.last_event_id, cursor.seen_event_id):
        DispatchCursor.objects.filter(pk=cursor.pk).update(last_event_id=last, seen_event_id=seen)
    return made


def dispatch(*, now=None, budget: int = BUDGET) -> int:
    """New deliveries for new job events, projects in turns; returns how many were made."""
    now = now or timezone.now()
    cap = settings.EULER_WEBHOOK_PENDING_PER_PROJECT
    with transaction.atomic():
        if not _pass_lock():
            return 0  # another dispatcher holds the pass
        by_project: dict[int, list[Webhook]] = {}
        for hook in Webhook.objects.filter(enabled=True).select_related("project").order_by("id"):
            by_project.setdefault(hook.project_id, []).append(hook)
        cursors = _cursors(by_project)
        pending = dict(
            Delivery.objects.filter(hook__project_id__in=list(by_project), state__in=OPEN)
            .values_list("hook__project_id")
            .annotate(n=Count("id"))
        )
        wanted = {p: wanted_events(hooks=len(h), pending=pending.get(p, 0), cap=cap) for p, h in by_project.items()}
        made = 0
        for project_id, share in fairness.shares(wanted, budget).items():
            if share <= 0:
                continue
            made += _project_pass(project_id, cursors[project_id], by_project[project_id], share, now)
    return made


def claim(*, now=None, per_project: int | None = None) -> list[list[tuple[int, int]]]:
    """Due deliveries handed to the senders: for each project with no batch in flight, its oldest due ones (at
    most `per_project`), claimed (pending → sending, one more attempt). Returns the batches, each a list of
    (delivery id, attempt number) of one project; a message naming an older attempt is ignored by the sender."""
    now = now or timezone.now()
    per_project = per_project or settings.EULER_WEBHOOK_SENDING_PER_PROJECT
    Delivery.objects.filter(state=DeliveryState.SENDING, updated_at__lt=now - LOST_AFTER).update(
        state=DeliveryState.PENDING, updated_at=now
    )
    busy = Delivery.objects.filter(state=DeliveryState.SENDING).values("hook__project_id")
    ranked = (
        Delivery.objects.filter(state=DeliveryState.PENDING, next_attempt_at__lte=now)
        .exclude(hook__project_id__in=busy)
        .annotate(
            project_id=F("hook__project_id"),
            rank=Window(RowNumber(), partition_by=[F("hook_id")], order_by=[F("next_attempt_at"), F("id")]),
        )
        .filter(rank__lte=PER_HOOK)
        .order_by("next_attempt_at", "id")
        .values_list("project_id", "id")
    )
    groups: dict[int, list[int]] = {}
    for project_id, delivery_id in ranked:
        group = groups.setdefault(project_id, [])
        if len(group) < per_project:
            group.append(delivery_id)
    batches = []
    for ids in groups.values():
        with transaction.atomic():
            mine = list(
                Delivery.objects.select_for_update(skip_locked=True)
                .filter(pk__in=ids, state=DeliveryState.PENDING)
                .values_list("id", "attempts")
            )
            Delivery.objects.filter(pk__in=[pk for pk, _ in mine]).update(
                state=DeliveryState.SENDING, attempts=F("attempts") + 1, updated_at=now
            )
        if mine:
            batches.append([(pk, attempts + 1) for pk, attempts in mine])
    return batches


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
