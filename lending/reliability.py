"""A node's reliability score, 0–100, from Euler's own records over a rolling window (docs/nodes.md).

The pure core (`Record`, `online_seconds`, `score`) takes plain figures; `record_for` and `refresh` read them
from the ledger and the node's events, and store the score on the node, where the scheduler reads it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime, timedelta

WINDOW = timedelta(days=14)
# Each input's weight: what one more of it costs (a factor on the score).
PER_GPU_FAULT = 0.85
PER_HEARTBEAT_GAP = 0.95
PER_RECLAIM = 0.98
LOSS_HOURS_FLOOR = 1.0  # lost attempts are counted per hour run, and at least this many hours


@dataclass(frozen=True, slots=True)
class Record:
    observed_seconds: float  # the part of the window since the node was approved
    online_seconds: float  # of which it was online
    hours_run: float  # attempts' run time that ended in the window
    lost: int  # attempts lost with the node (it vanished, its GPU failed, its container disappeared)
    reclaims: int  # attempts stopped because the machine was taken back (a reclaim, its window's end)
    gpu_faults: int  # GPU faults: attempts ended by a failed GPU, and GPUs marked unhealthy
    heartbeat_gaps: int  # times it went offline (missed heartbeats past EULER_NODE_OFFLINE_AFTER)


def online_seconds(*, start: datetime, end: datetime, flips: list[tuple[datetime, bool]], online_now: bool) -> float:
    """Seconds of [start, end) the node was online, from its online/offline flips in that span (pure).

    Before the first flip it was in the opposite state of that flip; with no flip, in the state it is in now.
    """
    flips = sorted((t, up) for t, up in flips if start <= t < end)
    state = (not flips[0][1]) if flips else online_now
    at, total = start, 0.0
    for t, up in flips:
        if state:
            total += (t - at).total_seconds()
        state, at = up, t
    if state:
        total += (end - at).total_seconds()
    return total


def score(r: Record) -> float:
    """0–100: the share of time online, times one factor per lost attempt per hour run and per fault (pure).

    A node with no record yet scores by its online time alone."""
    online = r.online_seconds / r.observed_seconds if r.observed_seconds > 0 else 1.0
    lost_per_hour = r.lost / max(r.hours_run, LOSS_HOURS_FLOOR)
    value = (
        min(1.0, max(0.0, online))
        / (1.0 + lost_per_hour)
        * PER_GPU_FAULT**r.gpu_faults
        * PER_HEARTBEAT_GAP**r.heartbeat_gaps
        * PER_RECLAIM**r.reclaims
    )
    return round(100.0 * value, 1)


def record_for(node, *, now: datetime) -> Record:
    """Read one node's figures over the window (the shell)."""
    from django.db.models import Count, Q, Sum

    from lending.machines import RECLAIM_REASONS
    from lending.models import LedgerEntry
    from nodes.models import EventKind, NodeEvent

    start = now - WINDOW
    if node.approved_at is not None and node.approved_at > start:
        start = node.approved_at
    start = min(start, now)
    events = NodeEvent.objects.filter(node_id=node.pk, created_at__gte=start, created_at__lt=now)
    flips = [
        (at, kind == EventKind.ONLINE)
        for kind, at in events.filter(kind__in=[EventKind.ONLINE, EventKind.OFFLINE]).values_list("kind", "created_at")
    ]
    sums = LedgerEntry.objects.filter(node_id=node.pk, ended_at__gte=start, ended_at__lte=now).aggregate(
        run=Sum("run_ms"),
        lost=Count("id", filter=Q(outcome="lost")),
        reclaims=Count("id", filter=Q(reason__in=RECLAIM_REASONS)),
        faults=Count("id", filter=Q(gpu_fault=True)),
    )
    return Record(
        observed_seconds=(now - start).total_seconds(),
        online_seconds=online_seconds(start=start, end=now, flips=flips, online_now=node.online),
        hours_run=(sums["run"] or 0) / 3_600_000,
        lost=sums["lost"],
        reclaims=sums["reclaims"],
        gpu_faults=sums["faults"] + events.filter(kind=EventKind.GPU_UNHEALTHY).count(),
        heartbeat_gaps=sum(1 for _, up in flips if not up),
    )


def refresh(*, now: datetime, node_ids=None) -> int:
    """Compute and store the score of every approved node (or of `node_ids`); returns how many."""
    from nodes.models import Approval, Node

    nodes = Node.objects.filter(approval=Approval.APPROVED)
    if node_ids is not None:
        nodes = nodes.filter(pk__in=list(node_ids))
    count = 0
    for node in nodes.only("pk", "online", "approved_at"):
        value = score(record_for(node, now=now))
        Node.objects.filter(pk=node.pk).update(reliability=value, reliability_at=now)
        count += 1
    return count


def scores_for(node_ids, *, now: datetime) -> dict[int, dict]:
    """Per node, its score and the figures behind it (computed now: the lender's page explains its number)."""
    from nodes.models import Node

    out = {}
    for node in Node.objects.filter(pk__in=list(node_ids)).only("pk", "online", "approved_at"):
        r = record_for(node, now=now)
        out[node.pk] = {"score": score(r), "window_days": WINDOW.days, "inputs": asdict(r)}
    return out
