"""A lender's availability window ends: the attempts running on the machine are stopped before the close.

The window's end is a reclaim known ahead. The scheduler places on a node only jobs that finish by their timeout
before its window closes, or that declare a checkpoint (jobs/scheduling/terms.py fits_window). A periodic pass
(lending.tasks.stop_at_window_end, every EULER_WINDOW_CHECK_INTERVAL seconds) asks each such attempt to stop when
its node's window closes within the attempt's stop grace plus that period: SIGTERM, the grace (the job's
`stop_grace_seconds`), SIGKILL, through jobs/stopping.py with reason `window_closed`, so the job is off the machine by
the window's end, its checkpoint taken at the stop, and it goes back to the queue without spending a retry (its
attempt ends `preempted`, reason `window_closed`: credited in the lenders' ledger as work Euler stopped). An attempt
found on a node whose window is already closed (the pass was late, or the lender narrowed the windows) is stopped
the same way at once. After the close the scheduler places nothing there until a window opens again.

`due_stops` decides (pure); `stop_due` reads the database and asks the stops.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from jobs.scheduling import terms as lender_terms


@dataclass(frozen=True, slots=True)
class Running:
    """An active attempt not yet asked to stop, on a node with windows."""

    attempt_id: int
    job_id: int
    node_id: int
    grace: int  # the stop grace it will get (the job's, within EULER_MAX_STOP_GRACE)
    ends_by: datetime | None = None  # when its timeout ends it (its start, or now if not started, plus its timeout)


@dataclass(frozen=True, slots=True)
class Due:
    attempt_id: int
    job_id: int
    node_id: int
    closes_in: float | None  # seconds until its node's window closes; None: closed already


def due_stops(
    now: datetime, nodes_terms: dict[int, dict], attempts: Iterable[Running], *, interval: float
) -> list[Due]:
    """The attempts to stop now: their node's window closes within their grace plus the pass's `interval`, or is
    closed (terms that cannot be read count as closed, as the scheduler reads them). An attempt whose timeout ends
    it by the close is left to end: the scheduler placed it because it does (fits_window), and stopping it would
    requeue it to be placed and stopped again until the close. A node with no windows (or not in `nodes_terms`)
    never stops anything. Pure."""
    reads = {node_id: lender_terms.read(terms, now=now) for node_id, terms in nodes_terms.items()}
    due = []
    for a in attempts:
        read = reads.get(a.node_id)
        if read is None:
            continue
        if not read.open:
            due.append(Due(a.attempt_id, a.job_id, a.node_id, None))
        elif read.left is not None and read.left <= a.grace + interval:
            if a.ends_by is not None and (a.ends_by - now).total_seconds() <= read.left:
                continue
            due.append(Due(a.attempt_id, a.job_id, a.node_id, read.left))
    return due


def why(due: Due, node_name: str) -> str:
    """The stop's message (in the job's event)."""
    if due.closes_in is None:
        return f"node {node_name} is outside its lender's availability windows"
    return f"node {node_name}'s availability window (its lender's terms) closes in {due.closes_in:.0f} s"


def stop_due(*, now: datetime | None = None) -> int:
    """Ask every due attempt to stop (jobs/stopping.py, reason window_closed, requeued without a retry spent), each
    in its own transaction holding its job row. Returns how many were asked."""
    from django.conf import settings
    from django.db import transaction
    from django.utils import timezone

    from jobs import stopping, transitions
    from jobs.models import Attempt
    from jobs.states import ATTEMPT_ACTIVE
    from nodes.models import Node

    now = now or timezone.now()
    nodes = dict(
        Node.objects.filter(lender_terms__has_key="windows")
        .exclude(lender_terms__windows=[])
        .values_list("pk", "lender_terms")
    )
    if not nodes:
        return 0
    rows = Attempt.objects.filter(state__in=ATTEMPT_ACTIVE, stop_reason="", node_id__in=list(nodes)).values_list(
        "pk", "job_id", "node_id", "node_name", "job__stop_grace_seconds", "started_at", "job__timeout_seconds"
    )
    names, running = {}, []
    for attempt_id, job_id, node_id, node_name, job_grace, started_at, timeout in rows:
        names[attempt_id] = node_name
        grace = stopping.clamp_grace(None, job_grace=job_grace)
        ends_by = (started_at or now) + timedelta(seconds=timeout)
        running.append(Running(attempt_id, job_id, node_id, grace, ends_by))
    asked = 0
    for due in due_stops(now, nodes, running, interval=settings.EULER_WINDOW_CHECK_INTERVAL):
        with transaction.atomic():
            job = transitions.lock(due.job_id)
            attempt = Attempt.objects.filter(pk=due.attempt_id).first() if job is not None else None
            if attempt is None:
                continue
            attempt.job = job
            asked += stopping.request_stop(
                attempt,
                reason=stopping.Reason.WINDOW,
                requeue=True,
                count_as_failure=False,
                grace=None,
                message=why(due, names[due.attempt_id]),
                now=now,
            )
    return asked
