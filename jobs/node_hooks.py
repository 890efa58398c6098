"""What the node channel asks the jobs app: work for a polling node, and stop orders on heartbeat."""

from __future__ import annotations

import math
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from euler import writes
from euler.prepared import Prepared
from jobs import stopping
from jobs.checkpoints import selectors as checkpoint_selectors
from jobs.models import Attempt, Job
from jobs.outputs import selectors as output_selectors
from jobs.states import ATTEMPT_ACTIVE, AttemptState
from nodeagent import protocol
from nodes import channel

PLATFORM = "platform"


def _assignment(attempt: Attempt, job: Job, node) -> protocol.Assignment:
    env = {}
    if node.trust == PLATFORM and job.has_env:
        # The only place job env is decrypted: for a platform node's assignment.
        env = Job.objects.only("env").get(pk=job.pk).env or {}
    return protocol.Assignment(
        attempt_id=attempt.pk,
        job_id=job.pk,
        attempt_number=attempt.number,
        image=job.image,
        command=list(job.command),
        env=env,
        cpu_milli=attempt.cpu_milli,
        memory_bytes=attempt.memory_bytes,
        disk_bytes=attempt.disk_bytes,
        network=job.network,
        gpu_uuids=list(attempt.gpu_uuids or []),
        timeout_seconds=job.timeout_seconds,
        node_trust=node.trust,
        **output_selectors.assignment_fields(job=job, attempt=attempt),
        **checkpoint_selectors.assignment_fields(job=job),
        runtime=attempt.runtime,
        isolation=attempt.isolation,
        array_index=job.array_index,
        array_count=job.array.count if job.array_id else None,
        stop_grace_seconds=stopping.clamp_grace(None, job_grace=job.stop_grace_seconds),
        warn_before_timeout_seconds=job.warn_before_timeout_seconds,
        warn_signal=job.warn_signal,
        service_port=job.service_port,
    )


def _stop_command(attempt_id: int, reason: str, grace: int | None) -> protocol.Command:
    """A stop order (jobs/stopping.py): its reason and grace (None: the agent uses the assignment's)."""
    return protocol.Command(type="stop_attempt", attempt_id=attempt_id, reason=reason, grace=grace)


def _outstanding() -> Q:
    """Attempts a poll may have to hand over: assigned and not stopped, or with a stop order not yet obeyed."""
    return Q(state=AttemptState.ASSIGNED, stop_reason="") | (
        ~Q(stop_reason="") & (Q(stop_sent_at__isnull=True) | Q(state__in=ATTEMPT_ACTIVE))
    )


def busy_nodes() -> set[int]:
    """Every node poll_provider may have something for now, in one query (the poll snapshot, channel.py)."""
    return set(Attempt.objects.filter(_outstanding(), node__isnull=False).values_list("node_id", flat=True).distinct())


_OUTSTANDING_ON = Prepared(
    lambda node_id: Attempt.objects.filter(_outstanding(), node_id=node_id).values_list(
        "state", "stop_reason", "delivered_at", "stop_sent_at"
    )[:OUTSTANDING_READ]
)
OUTSTANDING_READ = 64  # a node's outstanding attempts read at once to see if any is due; more: the full read decides
_ASSIGNED_ON = Prepared(
    lambda node_id: (
        Attempt.objects.select_related("job", "job__array")
        .defer("job__env")
        .filter(node_id=node_id, state=AttemptState.ASSIGNED, stop_reason="")
        .order_by("pk")
    )
)
_STOPS_ON = Prepared(
    lambda node_id: (
        Attempt.objects.filter(node_id=node_id)
        .exclude(stop_reason="")
        .filter(Q(stop_sent_at__isnull=True) | Q(state__in=ATTEMPT_ACTIVE))
        .values_list("pk", "stop_reason", "stop_sent_at", "stop_grace")
        .order_by("pk")
    )
)


def not_due(rows, *, again) -> list | None:
    """Rows (state, stop_reason, delivered_at, stop_sent_at) of outstanding attempts (pure): when each was handed
    over or its stop sent, if every one was so after `again` (nothing due before its redelivery); else None (some
    assignment or stop order is due now, or may be: the full read in poll_provider decides)."""
    times = []
    for state, stop_reason, delivered_at, stop_sent_at in rows:
        sent = stop_sent_at if stop_reason else (delivered_at if state == AttemptState.ASSIGNED else None)
        if sent is None or sent < again:
            return None
        times.append(sent)
    return times


def poll_provider(node) -> channel.Work:
    """Assigned attempts not yet handed over (or handed long ago and not started), and pending stop orders;
    with nothing due, until when nothing will be (the earliest redelivery) unless a wake-up says otherwise."""
    now = timezone.now()
    redeliver = timedelta(seconds=settings.EULER_JOB_REDELIVER_AFTER)
    again = now - redeliver
    assignments, commands = [], []
    later: list = []  # handed or stop-sent recently: due again at these times
    # The usual answers in one query, without the write transaction below: nothing assigned and no stop order
    # outstanding (an idle node), or all of it handed over recently (the poll an agent sends at once after taking
    # its assignments, while it creates their containers): nothing due until the first redelivery.
    outstanding = list(_OUTSTANDING_ON(node.pk))
    if not outstanding:
        return channel.Work([], [], quiet_until=math.inf)
    handed_at = not_due(outstanding, again=again)
    if handed_at is not None and len(outstanding) < OUTSTANDING_READ:
        return channel.Work([], [], quiet_until=(min(handed_at) + redeliver).timestamp())
    with transaction.atomic():
        handed = []
        for attempt in _ASSIGNED_ON(node.pk):
            if attempt.job.current_attempt_id != attempt.pk:
                continue
            if attempt.job.has_env and node.trust != PLATFORM:
                continue  # never: the scheduler does not place such jobs here
            if attempt.delivered_at is not None and attempt.delivered_at >= again:
                later.append(attempt.delivered_at)
                continue
            assignments.append(_assignment(attempt, attempt.job, node))
            handed.append(attempt.pk)
        if handed:
            writes.update_where(Attempt, None, {"delivered_at": now}, id__in=handed)
        sent = []
        for attempt_id, reason, sent_at, grace in _STOPS_ON(node.pk):
            if sent_at is not None and sent_at >= again:
                later.append(sent_at)
                continue
            commands.append(_stop_command(attempt_id, reason, grace))
            sent.append(attempt_id)
        if sent:
            Attempt.objects.filter(pk__in=sent).update(stop_sent_at=now)
    quiet_until = (min(later) + redeliver).timestamp() if later else math.inf
    return channel.Work(assignments, commands, quiet_until=quiet_until)


def heartbeat_hook(node, hb: protocol.Heartbeat) -> channel.Commands:
    """Stop containers the node runs for attempts that are not current (or must stop); settle the attempts
    whose containers the node no longer lists. At most two indexed queries; asks for the next heartbeat too
    while an unlisted attempt waits to be settled."""
    from jobs import attempts, usage

    now = timezone.now()
    listed = {r.attempt_id for r in hb.running}
    commands = []
    if listed:
        rows = {
            row["pk"]: row
            for row in Attempt.objects.filter(pk__in=listed).values(
                "pk",
                "node_id",
                "state",
                "stop_reason",
                "stop_grace",
                "job__current_attempt_id",
                "started_at",
                "metered_until",
            )
        }
        for attempt_id in sorted(listed):
            row = rows.get(attempt_id)
            current = (
                row is not None
                and row["node_id"] == node.pk
                and row["job__current_attempt_id"] == attempt_id
                and row["state"] in ATTEMPT_ACTIVE
            )
            if not current or row["stop_reason"]:
                reason = (row or {}).get("stop_reason") or "stale_attempt"
                commands.append(_stop_command(attempt_id, reason, (row or {}).get("stop_grace")))
            elif row["state"] == AttemptState.RUNNING and usage.meter_due(row, now):
                usage.meter(attempt_id=attempt_id, until=now)  # accrue while it runs, every METER_EVERY
    stopped_before = now - timedelta(seconds=2)
    started_before = now - timedelta(seconds=settings.EULER_JOB_MISSING_GRACE)
    unlisted = (
        Attempt.objects.filter(node=node, state__in=ATTEMPT_ACTIVE)
        .exclude(pk__in=listed)
        .values_list("pk", "state", "stop_reason", "stop_sent_at", "started_at")
    )
    again = False
    for attempt_id, state, stop_reason, stop_sent_at, started_at in list(unlisted):
        if stop_reason and stop_sent_at is not None and stop_sent_at < stopped_before:
            attempts.attempt_gone(attempt_id=attempt_id, now=now)  # stopped as asked
        elif not stop_reason and state == AttemptState.RUNNING and started_at and started_at < started_before:
            # Running here for a while, yet the node does not list it (a restart found no container): lost.
            attempts.attempt_missing(attempt_id=attempt_id, now=now)
        elif stop_reason or state == AttemptState.RUNNING:
            again = True  # not settled yet: look again on the next heartbeat
    return channel.Commands(commands, again=again)
