"""Every stop of an active attempt, whoever asks it (cancel, budget, reclaim, preemption): the one door, and how
a stopped attempt ends.

A stop is recorded on the attempt row (`stop_reason`, `stop_grace`, `stop_requeue`, `stop_failure`, `stop_by`);
the node learns it through its poll and heartbeat (jobs/node_hooks.py: a `stop_attempt` command with the reason
and the grace), sends SIGTERM, writes the reason to the container's /run/euler/stop, waits the grace, SIGKILLs, and
reports the end. The attempt keeps its resources (and its node its rights: jobs/fencing.py) until then, so the job
can save its work (a checkpoint) within the grace. However the attempt then ends (the node's report, the container
gone, the node lost, the deadline backstop) the stop decides the outcome (`ending`, pure), not what the node says:

- requeue and not a failure (reclaim, preempt, a lender's window's end): the attempt ends `reclaimed` / `preempted`
  (a window's end: `preempted`, reason `window_closed`), the job goes back to `queued` at once, its retry budget untouched, with an event naming the cause;
- a failure (timeout, budget): `failed` with the stop's reason; the retry policy decides the job;
- neither (cancel): `cancelled`.

A job that exits 0 by itself before it is told to stop has succeeded: that report wins.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from jobs.models import Attempt, JobEvent
from jobs.states import ATTEMPT_ACTIVE, AttemptState


class Reason:
    """The stop reasons (Attempt.stop_reason; protocol.STOP_WORDS gives the word the container reads)."""

    CANCEL = "cancelled"
    TIMEOUT = "timeout"
    BUDGET = "quota_exceeded"
    RECLAIM = "reclaim"
    PREEMPT = "preempt"
    DRAIN = "node_draining"
    WINDOW = "window_closed"  # the node's lender's availability window ends (lending/windows.py)


# A stop that requeues without counting as a failure ends its attempt in one of these states. A window's end is
# Euler stopping the work (known ahead, by the lender's terms): `preempted`, credited in the ledger, unlike a reclaim.
REQUEUE_OUTCOME = {
    Reason.RECLAIM: AttemptState.RECLAIMED,
    Reason.PREEMPT: AttemptState.PREEMPTED,
    Reason.WINDOW: AttemptState.PREEMPTED,
}
# The attempt's `reason` (and the requeue event's) for such a stop: the outcome, or what says more (a window's end).
REQUEUE_REASON = {Reason.WINDOW: "window_closed"}
REQUEUED = frozenset(REQUEUE_OUTCOME.values())
# Stops recorded before the flags existed: these were failures.
LEGACY_FAILURES = frozenset({Reason.TIMEOUT, Reason.BUDGET})


@dataclass(frozen=True, slots=True)
class Stop:
    """A stop as recorded on the attempt row."""

    reason: str
    requeue: bool = False
    failure: bool = False
    by: str = ""


def stop_of(row: dict) -> Stop | None:
    """The stop recorded in an attempt's values (`STOP_FIELDS`), or None."""
    if not row.get("stop_reason"):
        return None
    return Stop(
        reason=row["stop_reason"],
        requeue=bool(row.get("stop_requeue")),
        failure=bool(row.get("stop_failure")) or row["stop_reason"] in LEGACY_FAILURES,
        by=row.get("stop_by") or "",
    )


STOP_FIELDS = ("stop_reason", "stop_requeue", "stop_failure", "stop_by")


def ending(*, stop: Stop | None, outcome: str, reason: str) -> tuple[str, str]:
    """(attempt state, reason) for an attempt ending as `outcome`/`reason` says (a node's report, a lost node, the
    backstop), given the stop asked of it (None: none). Pure."""
    if stop is None:
        return outcome, reason
    if outcome == AttemptState.SUCCEEDED:
        return outcome, reason  # it finished before it was told to stop
    if stop.failure:
        return AttemptState.FAILED, stop.reason
    if stop.requeue and stop.reason in REQUEUE_OUTCOME:
        outcome = REQUEUE_OUTCOME[stop.reason]
        return outcome, requeue_word(stop, outcome)  # lending.machines.RECLAIM_REASONS names those that count
    return AttemptState.CANCELLED, stop.reason


def clamp_grace(grace: int | None, *, job_grace: int) -> int:
    """The grace a stop gets: the one asked, else the job's, never above EULER_MAX_STOP_GRACE nor below 0."""
    value = job_grace if grace is None else grace
    return max(0, min(int(value), settings.EULER_MAX_STOP_GRACE))


def stop_deadline(*, now: datetime, grace: int, current: datetime | None) -> datetime:
    """The server's backstop for a stop: grace + EULER_JOB_TIMEOUT_GRACE from now, never later than it was. Pure."""
    due = now + timedelta(seconds=grace + settings.EULER_JOB_TIMEOUT_GRACE)
    return due if current is None or due < current else current


def describe(*, reason: str, by: str | None, grace: int, requeue: bool, count_as_failure: bool) -> str:
    who = f" by {by}" if by else ""
    then = "then back to the queue (its retry budget untouched)" if requeue and not count_as_failure else "then it ends"
    return f"stop asked ({reason}{who}): SIGTERM, {grace} s grace, SIGKILL; {then}"


def request_stop(
    attempt: Attempt,
    *,
    reason: str,
    requeue: bool,
    count_as_failure: bool,
    by: str | None = None,
    grace: int | None = None,
    message: str = "",
    now: datetime | None = None,
) -> bool:
    """Ask the attempt's node to stop it: SIGTERM, `grace` seconds (None: the job's stop_grace_seconds; capped at
    EULER_MAX_STOP_GRACE), SIGKILL. The attempt keeps its resources until its node reports the end (or the backstop,
    grace + EULER_JOB_TIMEOUT_GRACE from now, ends it); then `ending` decides how it ends and, for a requeue
    without failure (REQUEUE_OUTCOME: reclaim, preempt, window_closed), the job goes back to `queued` without
    spending a retry.

    Call inside a transaction holding the job row (transitions.lock); `attempt.job` must be loaded. Returns False
    when the attempt is no longer active or a stop was already asked of it (the first stop wins). Writes a JobEvent
    naming the cause and wakes the node after commit."""
    from jobs.wakeups import wake_on_commit

    if requeue and not count_as_failure and reason not in REQUEUE_OUTCOME:
        raise ValueError(f"a requeue without failure needs a reason in {sorted(REQUEUE_OUTCOME)}, got {reason!r}")
    now = now or timezone.now()
    job = attempt.job
    grace = clamp_grace(grace, job_grace=job.stop_grace_seconds)
    current = Attempt.objects.filter(pk=attempt.pk).values_list("deadline_at", flat=True).first()
    updated = Attempt.objects.filter(Q(pk=attempt.pk), Q(state__in=ATTEMPT_ACTIVE), Q(stop_reason="")).update(
        stop_reason=reason[:32],
        stop_grace=grace,
        stop_requeue=requeue,
        stop_failure=count_as_failure,
        stop_by=(by or "")[:150],
        stop_sent_at=None,
        deadline_at=stop_deadline(now=now, grace=grace, current=current),
    )
    if updated != 1:
        return False
    note = describe(reason=reason, by=by, grace=grace, requeue=requeue, count_as_failure=count_as_failure)
    if message:
        note = f"{note}: {message}"
    JobEvent.objects.create(
        job=job, attempt=attempt, from_state=job.state, to_state=job.state, reason="stop_requested", message=note[:1000]
    )
    attempt.stop_reason, attempt.stop_grace = reason[:32], grace
    attempt.stop_requeue, attempt.stop_failure, attempt.stop_by = requeue, count_as_failure, (by or "")[:150]
    if attempt.node_id is not None:
        wake_on_commit(attempt.node_id)
    return True


def requeue_word(stop: Stop | None, outcome: str) -> str:
    """The reason a requeued attempt ends with (and its job's event says): the outcome, unless the stop's reason
    says more (REQUEUE_REASON: `window_closed`). Pure."""
    return REQUEUE_REASON.get(stop.reason, str(outcome)) if stop is not None else str(outcome)


def requeue_note(*, attempt: Attempt, stop: Stop, outcome: str) -> tuple[str, str]:
    """(event message, pending reason) for a job requeued after its attempt was `outcome` (reclaimed, preempted)."""
    who = f" by {stop.by}" if stop.by else ""
    where = f" on node {attempt.node_name}" if attempt.node_name else ""
    if stop.reason == Reason.WINDOW:
        outcome = "stopped at the end of its lender's availability window"
    note = f"attempt {attempt.number}{where} {outcome}{who}: back to the queue, its retry budget untouched"
    pending = f"requeued: its attempt{where} was {outcome}{who}"
    return note, pending


def stop_node_attempts(
    *, node_id: int, reason: str, requeue: bool, count_as_failure: bool, by: str | None, grace: int | None
) -> int:
    """`request_stop` for every active attempt on the node (a reclaim), each with its job row locked; in the
    caller's transaction. Returns how many were asked to stop."""
    from jobs import transitions

    stopped = 0
    rows = Attempt.objects.filter(node_id=node_id, state__in=ATTEMPT_ACTIVE, stop_reason="")
    for attempt_id, job_id in list(rows.order_by("job_id").values_list("pk", "job_id")):
        job = transitions.lock(job_id)
        attempt = Attempt.objects.filter(pk=attempt_id).first() if job is not None else None
        if attempt is None:
            continue
        attempt.job = job
        stopped += request_stop(
            attempt, reason=reason, requeue=requeue, count_as_failure=count_as_failure, by=by, grace=grace
        )
    return stopped
