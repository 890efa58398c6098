"""The only code that changes a job's state: checks the table, writes a JobEvent, broadcasts after commit
(jobs/broadcast.py).

Callers hold the job row locked (`lock(job_id)` or the scheduler's SKIP LOCKED select) inside a transaction.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import connection, transaction
from django.utils import timezone

from euler import writes
from euler.errors import Conflict
from jobs import broadcast, logstore
from jobs.models import Attempt, Job, JobEvent
from jobs.states import ACTIVE, ATTEMPT_ACTIVE, IN_SLOT, TERMINAL, JobState, allowed

log = logging.getLogger(__name__)


def events_written_on_commit() -> None:
    """Tell listeners (the webhook dispatcher) that job events were written, once the transaction commits."""
    transaction.on_commit(_events_written)


def _events_written() -> None:
    from jobs.signals import events_written

    try:
        events_written.send(sender=JobEvent)
    except Exception as exc:  # noqa: BLE001 - a listener's failure never fails the write that committed
        log.warning("events_written listener failed: %s", type(exc).__name__)


def lock(job_id: int, *, project=None) -> Job | None:
    qs = Job.objects.select_for_update().filter(pk=job_id).defer("env")  # env is decrypted only for a node
    if project is not None:
        qs = qs.filter(project=project)
    return qs.first()


def check(job: Job, to: str) -> None:
    if not allowed(job.state, to):
        raise Conflict(f"A {job.state} job cannot become {to}.", code="invalid_transition")


def move(
    job: Job,
    to: str,
    *,
    attempt: Attempt | None = None,
    why: str = "",
    note: str = "",
    now: datetime | None = None,
    **fields,
) -> Job:
    """Move a locked job to `to` (409 invalid_transition when the table forbids it), setting `fields` too.

    `why` (a short code) and `note` go to the JobEvent; `fields` are Job columns.
    """
    check(job, to)
    now = now or timezone.now()
    source = job.state
    job.state = to
    if to in TERMINAL:
        fields.setdefault("ended_at", now)
    if to == JobState.QUEUED:
        fields.setdefault("queued_at", now)
        fields.setdefault("ended_at", None)
    if to != JobState.QUEUED:
        fields.setdefault("pending_reason", "")
    for name, value in fields.items():
        setattr(job, name, value)
    # Each move's two writes as save() and create() make them, their statements built once (euler/writes.py).
    writes.update_fields(job, ["state", "updated_at", *fields])
    writes.insert(
        JobEvent(job=job, attempt=attempt, from_state=source, to_state=to, reason=why[:32], message=note[:1000])
    )
    at = attempt.node_name if attempt is not None and to in (JobState.ASSIGNED, JobState.RUNNING) else ""
    if to in TERMINAL and attempt is not None:
        # The end's attempt and its last stored log chunk: a log reader that has sent it ends without reading the
        # log again (jobs/consumers.py).
        extra = {"attempt_id": attempt.pk, "log_seq": logstore.last_seq(attempt.pk)}
        broadcast.on_commit([(job.pk, to, at or "", extra)])
    else:
        broadcast.on_commit([(job.pk, to, at or "")])
    events_written_on_commit()  # after the broadcast (hooks run in order): the webhooks' nudge asks Redis first
    if to in TERMINAL:
        ended([job], now=now)
    return job


def created(job: Job) -> None:
    """A new job's first event. Not broadcast: nobody can be watching a job before its creation commits (a log
    socket is accepted only for a job it can read), and the submit's reply would wait for a send to nobody."""
    writes.insert(JobEvent(job=job, from_state="", to_state=job.state, message="submitted"))
    events_written_on_commit()


def assign_many(jobs: list[Job], attempts: list[Attempt], *, now: datetime) -> None:
    """The scheduler's batch move queued → assigned: one statement per table, not one per job.

    `jobs` are locked (SKIP LOCKED) and queued; `attempts` are unsaved, one per job, in the same order.
    """
    for job in jobs:
        check(job, JobState.ASSIGNED)
    Attempt.objects.bulk_create(attempts)
    events = []
    for job, attempt in zip(jobs, attempts, strict=True):
        job.state = JobState.ASSIGNED
        job.current_attempt = attempt
        job.pending_reason = ""
        job.updated_at = now
        events.append(JobEvent(job=job, attempt=attempt, from_state=JobState.QUEUED, to_state=JobState.ASSIGNED))
    # One prepared statement run for every row (pipelined by psycopg); bulk_update's CASE is far slower.
    with connection.cursor() as cur:
        cur.executemany(
            f"UPDATE {Job._meta.db_table} SET state = %s, current_attempt_id = %s, pending_reason = '', "
            "updated_at = %s WHERE id = %s",
            [(JobState.ASSIGNED, job.current_attempt_id, now, job.pk) for job in jobs],
        )
    writes.insert(*events)
    events_written_on_commit()
    moves = [(job.pk, JobState.ASSIGNED, attempt.node_name or "") for job, attempt in zip(jobs, attempts, strict=True)]
    broadcast.on_commit(moves)


# Arrays and dependencies (jobs.workflow decides, jobs.deps reads). Lock order: job rows, then array rows.


def release_many(ids: list[int], *, now: datetime, why: str = "released", note: str = "") -> int:
    """waiting → queued for the locked jobs `ids` (dependencies met, or a free slot in their array)."""
    if not ids:
        return 0
    moved = list(Job.objects.filter(pk__in=ids, state=JobState.WAITING).values_list("pk", flat=True))
    Job.objects.filter(pk__in=moved).update(
        state=JobState.QUEUED, queued_at=now, ended_at=None, pending_reason="", updated_at=now
    )
    JobEvent.objects.bulk_create(
        JobEvent(job_id=i, from_state=JobState.WAITING, to_state=JobState.QUEUED, reason=why, message=note)
        for i in moved
    )
    if moved:
        events_written_on_commit()
    moves = [(i, JobState.QUEUED) for i in moved]
    broadcast.on_commit(moves)
    if moved:
        from jobs.wakeups import schedule_on_commit

        schedule_on_commit()
    return len(moved)


def end_many(jobs: list[Job], *, why: str, note: str, now: datetime | None = None) -> list[Job]:
    """Cancel many locked jobs at once (an array, or the dependents of a failed job): waiting and queued ones end
    at once; an active one's node is told to stop its container (the attempt holds its resources till then)."""
    now = now or timezone.now()
    jobs = _cancel_rows(jobs, why=why, note=note, now=now)
    ended(jobs, now=now)
    return jobs


def _cancel_rows(jobs: list[Job], *, why: str, note: str, now: datetime) -> list[Job]:
    jobs = [job for job in jobs if allowed(job.state, JobState.CANCELLED)]
    if not jobs:
        return []
    stopping = [job.current_attempt_id for job in jobs if job.state in ACTIVE and job.current_attempt_id]
    events = [
        JobEvent(job=job, attempt_id=job.current_attempt_id if job.state in ACTIVE else None, from_state=job.state,
                 to_state=JobState.CANCELLED, reason=why[:32], message=note[:1000])
        for job in jobs
    ]  # fmt: skip
    Job.objects.filter(pk__in=[job.pk for job in jobs]).update(
        state=JobState.CANCELLED, reason=why[:32], ended_at=now, pending_reason="", updated_at=now
    )
    JobEvent.objects.bulk_create(events)
    events_written_on_commit()
    for job in jobs:
        job.state, job.reason, job.ended_at = JobState.CANCELLED, why[:32], now
    if stopping:
        from jobs.wakeups import wake_nodes

        # Each with its job's grace (jobs/stopping.py: SIGTERM, grace, SIGKILL); the batch in one statement per grace.
        attempts = Attempt.objects.filter(pk__in=stopping, state__in=ATTEMPT_ACTIVE, stop_reason="")
        nodes = sorted(set(attempts.exclude(node__isnull=True).values_list("node_id", flat=True)))
        graces = {job.current_attempt_id: job.stop_grace_seconds for job in jobs if job.current_attempt_id}
        by_grace: dict[int, list[int]] = {}
        for attempt_id in stopping:
            by_grace.setdefault(_grace(graces.get(attempt_id)), []).append(attempt_id)
        for grace, ids in by_grace.items():
            attempts.filter(pk__in=ids).update(stop_reason="cancelled", stop_grace=grace, stop_by=why[:150])
        transaction.on_commit(lambda: wake_nodes(nodes))
    moves = [(job.pk, JobState.CANCELLED) for job in jobs]
    broadcast.on_commit(moves)
    return jobs


def _grace(job_grace: int | None) -> int:
    """The job's stop grace within the operator's maximum (as jobs.stopping.clamp_grace, which builds on this module)."""
    from django.conf import settings

    return max(0, min(30 if job_grace is None else job_grace, settings.EULER_MAX_STOP_GRACE))


def admit(array, *, now: datetime) -> int:
    """Give the locked array's free slots to its lowest waiting tasks (none while its dependencies hold it)."""
    from jobs import workflow

    if array.held:
        return 0
    in_slot = Job.objects.filter(array_id=array.pk, state__in=IN_SLOT).count() if array.parallelism else 0
    room = workflow.room(parallelism=array.parallelism, in_slot=in_slot, waiting=array.count)
    if room <= 0:
        return 0
    ids = list(
        Job.objects.select_for_update(skip_locked=True)
        .filter(array_id=array.pk, state=JobState.WAITING)
        .order_by("array_index")
        .values_list("pk", flat=True)[:room]
    )
    return release_many(ids, now=now)


def ended(jobs: list[Job], *, now: datetime) -> None:
    """Jobs that just ended, in their ending's transaction: their arrays' free slots go to waiting tasks, and
    what waited on them is released or, when its condition can never hold, cancelled `dependency_failed` at
    once; those cancellations cascade the same way, round by round, in this same transaction."""
    from jobs import deps, workflow
    from jobs.workflow_models import JobArray

    while jobs:
        job_ids = {job.pk for job in jobs}
        array_ids = {job.array_id for job in jobs if job.array_id}
        for array in JobArray.objects.select_for_update().filter(pk__in=array_ids).order_by("pk") if array_ids else ():
            admit(array, now=now)
        never, ready = deps.settle(job_ids=job_ids, array_ids=array_ids)
        if not never and not ready:
            return  # nothing waited on them (the common case): no cancellations, no releases
        jobs = []
        never_jobs = [i for kind, i in never if kind == "job"]
        never_arrays = [i for kind, i in never if kind == "array"]
        doomed = Job.objects.select_for_update().filter(pk__in=never_jobs) | Job.objects.select_for_update().filter(
            array_id__in=never_arrays
        )
        doomed = list(doomed.exclude(state__in=TERMINAL).defer("env").order_by("pk"))
        note = "a dependency ended and can never be met"
        jobs = _cancel_rows(doomed, why="dependency_failed", note=note, now=now)  # the next round settles theirs
        for kind, i in ready:
            if kind == "job":
                ids = list(
                    Job.objects.select_for_update().filter(pk=i, state=JobState.WAITING).values_list("pk", flat=True)
                )
                release_many(ids, now=now, why="dependencies_met", note="its dependencies are met")
                continue
            array = JobArray.objects.select_for_update().filter(pk=i).first()
            if array is not None and array.held:
                array.held = False
                array.save(update_fields=["held"])
                admit(array, now=now)
                if array.parallelism:
                    Job.objects.filter(array_id=array.pk, state=JobState.WAITING).update(
                        pending_reason=workflow.parallelism_reason(array.pk, array.parallelism)
                    )
