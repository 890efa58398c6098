"""Writes driven by nodes and the clock: attempt reports, lost nodes, the deadline backstop, retry policy.

A node's report passes jobs.fencing first (409 stale_attempt once the attempt ended: a duplicate `ended` changes
nothing). Attempt rows change by conditional UPDATE (`state IN active`) and the count decides: the clock's and the
lost node's paths race each other and the reports that way. Lock order everywhere: the job row, then the attempt.
"""

from __future__ import annotations

import logging
import random
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone
from redis.exceptions import RedisError

from euler import writes
from jobs import fencing, retrypolicy, signals, stopping, transitions, usage
from jobs.models import Attempt, Job
from jobs.outputs import services as output_services
from jobs.states import (
    ACTIVE,
    ATTEMPT_ACTIVE,
    AttemptState,
    JobState,
    attempt_outcome,
    retry_category,
)
from jobs.wakeups import request_pass_if_paced, schedule_on_commit, wake_on_commit
from nodeagent import protocol

log = logging.getLogger(__name__)

_JOB_STATE_FOR = {
    AttemptState.SUCCEEDED: JobState.SUCCEEDED,
    AttemptState.FAILED: JobState.FAILED,
    AttemptState.CANCELLED: JobState.CANCELLED,
    AttemptState.LOST: JobState.LOST,
}


def backstop_seconds(job: Job) -> int:
    """A running attempt's server backstop: its timeout, its stop grace, then EULER_JOB_TIMEOUT_GRACE."""
    return (
        job.timeout_seconds
        + stopping.clamp_grace(None, job_grace=job.stop_grace_seconds)
        + (settings.EULER_JOB_TIMEOUT_GRACE)
    )


def retry_delay(job: Job, *, retry_number: int) -> float:
    """The job's backoff (its own settings over the operator's defaults), with jitter."""
    default = retrypolicy.Backoff(
        settings.EULER_JOB_RETRY_BACKOFF,
        2.0,
        max(settings.EULER_JOB_RETRY_BACKOFF_MAX, settings.EULER_JOB_RETRY_BACKOFF),
    )
    try:
        backoff = retrypolicy.parse_backoff(job.retry_backoff, default=default)
    except retrypolicy.PolicyError:
        backoff = default  # stored before a stricter rule: the defaults rather than no retry
    return retrypolicy.backoff_delay(retry_number=retry_number, backoff=backoff, u=random.random())


def _settle_job(job: Job, attempt: Attempt, *, outcome: str, reason: str, exit_code: int | None, now) -> None:
    """After the job's current attempt ended: retry it (with backoff) when the policy says so, else end it. An
    attempt stopped to be requeued (reclaimed, preempted: jobs/stopping.py) requeues at once, no retry spent."""
    if job.state not in ACTIVE or job.current_attempt_id != attempt.pk:
        return  # cancelled meanwhile, or already moved on
    if outcome in stopping.REQUEUED:
        stop = stopping.stop_of({f: getattr(attempt, f) for f in stopping.STOP_FIELDS})
        note, pending = stopping.requeue_note(attempt=attempt, stop=stop, outcome=outcome)
        transitions.move(
            job,
            JobState.QUEUED,
            attempt=attempt,
            why=stopping.requeue_word(stop, outcome),
            note=note,
            now=now,
            current_attempt=None,
            not_before=None,
            pending_reason=pending,
        )
        return
    category = retry_category(attempt_state=outcome, reason=reason)
    why = retrypolicy.retry_reason(retry_on=job.retry_on, category=category, reason=reason, exit_code=exit_code)
    if why and job.retries_used < job.max_retries:
        delay = retry_delay(job, retry_number=job.retries_used + 1)
        at = now + timedelta(seconds=delay)
        code = "" if exit_code is None else f", exit code {exit_code}"
        transitions.move(
            job,
            JobState.QUEUED,
            attempt=attempt,
            why=category,
            note=f"attempt {attempt.number} {outcome} ({reason or 'exited'}{code}): {why}; retry "
            f"{job.retries_used + 1} of {job.max_retries} in {delay:g}s, not before {at.isoformat()}",
            now=now,
            current_attempt=None,
            retries_used=job.retries_used + 1,
            not_before=at,
            pending_reason=f"waiting for retry backoff until {at.isoformat()}",
        )
        return
    transitions.move(
        job,
        _JOB_STATE_FOR[outcome],
        attempt=attempt,
        why=reason or "",
        now=now,
        exit_code=exit_code,
        reason="" if outcome == AttemptState.SUCCEEDED else (reason or "exited"),
    )


def end_attempt(
    attempt_id: int,
    job_id: int,
    *,
    outcome: str,
    reason: str,
    exit_code=None,
    message="",
    now,
    locked: Attempt | None = None,
    **extra,
) -> bool:
    """End an active attempt (conditional UPDATE) and settle its job; False when it had already ended. A stop asked
    of it (jobs/stopping.py) decides how it ends, whoever ends it. `locked`: the attempt, its job loaded, both rows
    already locked in this transaction (jobs.fencing.attempt_for with Lock.JOB): they are not read again."""
    if locked is not None:
        job = locked.job
        row = {f: getattr(locked, f) for f in stopping.STOP_FIELDS} if locked.state in ATTEMPT_ACTIVE else None
    else:
        job = transitions.lock(job_id)
        row = Attempt.objects.filter(pk=attempt_id, state__in=ATTEMPT_ACTIVE).values(*stopping.STOP_FIELDS).first()
    if row is None or job is None:
        return False
    stop = stopping.stop_of(row)
    outcome, reason = stopping.ending(stop=stop, outcome=outcome, reason=reason)
    if stop is not None:
        extra.pop("stop_reason", None)  # the first stop asked stays the one recorded
    ending = dict(state=outcome, reason=reason, exit_code=exit_code, message=message[:2000], ended_at=now, **extra)
    updated = writes.update_where(Attempt, attempt_id, ending, state__in=sorted(ATTEMPT_ACTIVE))
    if updated != 1 or job is None:
        return False
    # The locked row as read: the UPDATE above left its metering fields as they were.
    metered = usage.meter_row(locked, project_id=job.project_id) if locked is not None else None
    usage.meter(attempt_id=attempt_id, until=now, row=metered)
    signals.attempt_ended.send(sender=Attempt, attempt_id=attempt_id, now=now)  # the lenders' ledger
    if locked is not None:
        attempt = locked
        for field, value in ending.items():  # the row as the UPDATE left it (it is locked: nobody else wrote it)
            setattr(attempt, field, value)
    else:
        attempt = Attempt.objects.get(pk=attempt_id)
    _settle_job(job, attempt, outcome=outcome, reason=reason, exit_code=exit_code, now=now)
    schedule_on_commit(if_queued=True)  # its resources are free: for the jobs queued for them
    return True


@transaction.atomic
def attempt_report(*, node, attempt_id: int, report: protocol.AttemptReport, now: datetime | None = None):
    """A node's report on its attempt. Fenced (jobs.fencing, Right.REPORT): only while the attempt is active, its
    job's current one, on that node; else 409 stale_attempt (stop) and nothing changes. So a duplicate `ended`
    report, or one after the server ended the attempt, stores no text, adds no event and sends no webhook."""
    now = now or timezone.now()
    attempt = fencing.attempt_for(node=node, attempt_id=attempt_id, right=fencing.Right.REPORT, lock=fencing.Lock.JOB)
    job = attempt.job
    if report.state == "running":
        # The agent stops a job at its timeout with its grace (SIGTERM, grace, SIGKILL): the backstop waits for both.
        deadline = now + timedelta(seconds=backstop_seconds(job))
        if attempt.stop_reason:  # a stop asked before it started: its own, earlier deadline stays
            deadline = min(deadline, attempt.deadline_at or deadline)
        ran_under = {"runtime": report.runtime} if report.runtime else {}  # what the node started it with
        started = dict(
            state=AttemptState.RUNNING, started_at=now, deadline_at=deadline, container_id=report.container_id
        )
        updated = writes.update_where(Attempt, attempt.pk, started | ran_under, state=AttemptState.ASSIGNED)
        if updated == 1 and job.state == JobState.ASSIGNED:
            transitions.move(job, JobState.RUNNING, attempt=attempt, now=now)
        if updated == 1:
            transaction.on_commit(request_pass_if_paced)  # a place in the handover window is free
        # The rows are locked: the attempt is still active, and a stop asked of it is on the row read.
        return protocol.ReportReply(accepted=True, stop=bool(attempt.stop_reason))
    outcome = attempt_outcome(reason=report.reason, exit_code=report.exit_code)
    extra = {"container_id": report.container_id} if report.container_id else {}
    output_services.note_report(job=job, attempt=attempt, report=report)
    if report.gpu_stats:
        extra["gpu_stats"] = [s.model_dump(mode="json") for s in report.gpu_stats]
    end_attempt(
        attempt.pk,
        job.pk,
        outcome=outcome,
        reason=report.reason or "exited",
        exit_code=report.exit_code,
        message=report.message,
        now=now,
        locked=attempt,
        **extra,
    )
    return protocol.ReportReply(accepted=True, stop=False)


def node_lost(*, node_id: int, now: datetime | None = None, message: str = "the node went offline") -> int:
    """Every active attempt on the node is lost; their jobs requeue or end `lost`. Returns how many.

    Except those its agent, stopping, said it left running for its next start (POST leaving): they are held
    until the hold expires (EULER_NODE_RESTART_HOLD), and the sweep loses them after that if the node is still
    offline. Redis not answering: no hold (lost, as before holds existed)."""
    now = now or timezone.now()
    count = 0
    pairs = list(Attempt.objects.filter(node_id=node_id, state__in=ATTEMPT_ACTIVE).values_list("pk", "job_id"))
    held = _held(node_id) if pairs else set()
    for attempt_id, job_id in pairs:
        if attempt_id in held:
            continue
        with transaction.atomic():
            if end_attempt(attempt_id, job_id, outcome=AttemptState.LOST, reason="lost", message=message, now=now):
                count += 1
    if count:
        log.info("node %s offline: %d attempts lost", node_id, count)
    if held & {a for a, _ in pairs}:
        log.info("node %s offline: attempts %s held for its agent's restart", node_id, sorted(held))
    return count


def hold_for_restart(*, node, attempt_ids: list[int]) -> list[int]:
    """The node's agent is stopping and leaves these attempts' containers for its next start: hold those that are
    active on this node and their job's current attempt (a node names only its own) from being lost while the node
    is offline, for EULER_NODE_RESTART_HOLD seconds. Returns the ids held."""
    from nodes import livestore

    held = sorted(
        Attempt.objects.filter(
            pk__in=set(attempt_ids), node=node, state__in=ATTEMPT_ACTIVE, job__current_attempt=F("pk")
        ).values_list("pk", flat=True)
    )
    try:
        livestore.hold_attempts(node.pk, held, settings.EULER_NODE_RESTART_HOLD)
    except RedisError:
        log.warning("node %s: Redis did not answer; its attempts are not held for its restart", node.pk)
        return []
    if held:
        log.info("node %s: its agent stops and leaves %d attempts running; held %g s", node.pk, len(held),
                 settings.EULER_NODE_RESTART_HOLD)  # fmt: skip
    return held


def _held(node_id: int) -> set[int]:
    from nodes import livestore

    try:
        return livestore.held_attempts(node_id)
    except RedisError:
        log.warning("node %s: Redis did not answer; its attempts are not held", node_id)
        return set()


def deadlines_expire(*, now: datetime | None = None) -> int:
    """Server backstop: active attempts past their deadline fail `timeout`, and their node is told to stop."""
    now = now or timezone.now()
    count = 0
    rows = Attempt.objects.filter(state__in=ATTEMPT_ACTIVE, deadline_at__lt=now)
    for attempt_id, job_id, node_id in rows.values_list("pk", "job_id", "node_id"):
        with transaction.atomic():
            ended = end_attempt(
                attempt_id,
                job_id,
                outcome=AttemptState.FAILED,
                reason="timeout",
                message="no end reported before the deadline (server backstop)",
                now=now,
                stop_reason="timeout",
            )
            if ended:
                count += 1
                wake_on_commit(node_id)
    return count


def offline_sweep(*, now: datetime | None = None) -> int:
    """Backstop for a missed node_offline signal: attempts held by offline or missing nodes are lost."""
    from nodes.models import Node

    offline = (
        Attempt.objects.filter(state__in=ATTEMPT_ACTIVE)
        .exclude(node__in=Node.objects.filter(online=True))
        .values_list("node_id", flat=True)
        .distinct()
    )
    count = 0
    for node_id in list(offline):
        if node_id is None:
            for attempt_id, job_id in Attempt.objects.filter(node__isnull=True, state__in=ATTEMPT_ACTIVE).values_list(
                "pk", "job_id"
            ):
                with transaction.atomic():
                    count += end_attempt(
                        attempt_id, job_id, outcome=AttemptState.LOST, reason="lost", now=now or timezone.now()
                    )
        else:
            count += node_lost(node_id=node_id, now=now)
    return count


@transaction.atomic
def attempt_gone(*, attempt_id: int, now: datetime | None = None) -> bool:
    """A stop was asked and the node no longer lists the container: the attempt ended as asked."""
    now = now or timezone.now()
    row = Attempt.objects.filter(pk=attempt_id).values("job_id", "stop_reason").first()
    if row is None:
        return False
    # The stop recorded on the row decides the outcome (jobs.stopping.ending, in end_attempt).
    return end_attempt(
        attempt_id,
        row["job_id"],
        outcome=AttemptState.CANCELLED,
        reason=row["stop_reason"] or "cancelled",
        message="stopped",
        now=now,
    )


@transaction.atomic
def attempt_missing(*, attempt_id: int, now: datetime | None = None) -> bool:
    """The node no longer lists a container it ran: the attempt is lost (the retry policy decides the job)."""
    now = now or timezone.now()
    row = Attempt.objects.filter(pk=attempt_id).values("job_id").first()
    if row is None:
        return False
    message = "the node no longer runs this attempt's container"
    return end_attempt(attempt_id, row["job_id"], outcome=AttemptState.LOST, reason="lost", message=message, now=now)
