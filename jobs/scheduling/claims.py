"""Preemption's DB shell: what a pass reads for it (the claims that hold nodes for preemptors, the attempts that may be
preempted) and what it writes when the policy decides a preemption (preemption.py decides; jobs.stopping stops).

A claim: a preemptor still queued holds the node of its victims while any of them is still stopping, and for
EULER_PREEMPT_CLAIM_SECONDS after the last one stopped; while it stands the preemptor does not preempt again, and
no other job takes what it needs there.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Count, F

from euler.prepared import Prepared
from jobs import stopping, transitions
from jobs.models import Attempt, Job, Preemption
from jobs.scheduling.loading import job_snapshot
from jobs.scheduling.preemption import Decision
from jobs.scheduling.snapshots import JobSnapshot
from jobs.scheduling.victims import Guards, Running
from jobs.states import ATTEMPT_ACTIVE, JobState

HOUR = timedelta(hours=1)


def guards() -> Guards | None:
    """The operator's guards; None when preemption is off (EULER_PREEMPT_MAX_PER_HOUR=0)."""
    if settings.EULER_PREEMPT_MAX_PER_HOUR <= 0:
        return None
    return Guards(
        min_run_seconds=settings.EULER_PREEMPT_MIN_RUN_SECONDS, max_per_hour=settings.EULER_PREEMPT_MAX_PER_HOUR
    )


_CLAIM_FIELDS = ("preemptor_id", "node_id", "victim_attempt__state", "victim_attempt__ended_at", "created_at")
_CLAIMS = Prepared(
    lambda: (
        Preemption.objects.filter(preemptor__state=JobState.QUEUED, node__isnull=False)
        .values_list(*_CLAIM_FIELDS)
        .order_by("preemptor_id", "-created_at")
    )
)


def standing(*, now: datetime) -> dict[int, tuple[int, int, JobSnapshot]]:
    """The claims that stand: preemptor's job id -> (node id, its victims still stopping, its snapshot)."""
    rows = [dict(zip(_CLAIM_FIELDS, row, strict=True)) for row in _CLAIMS()]
    latest: dict[int, tuple] = {}  # preemptor -> (node, its latest preemption's time)
    stopping_now: dict[int, int] = {}
    ended: dict[int, datetime] = {}
    for row in rows:
        pid = row["preemptor_id"]
        if pid not in latest:
            latest[pid] = (row["node_id"], row["created_at"])
        if row["created_at"] != latest[pid][1] or row["node_id"] != latest[pid][0]:
            continue  # an older preemption of the same preemptor: its claim was replaced
        if row["victim_attempt__state"] in ATTEMPT_ACTIVE:
            stopping_now[pid] = stopping_now.get(pid, 0) + 1
        elif row["victim_attempt__ended_at"] is not None:
            ended[pid] = max(ended.get(pid, row["victim_attempt__ended_at"]), row["victim_attempt__ended_at"])
    hold = timedelta(seconds=settings.EULER_PREEMPT_CLAIM_SECONDS)
    ids = [pid for pid in latest if stopping_now.get(pid) or (pid in ended and ended[pid] > now - hold)]
    if not ids:
        return {}
    jobs = {job.pk: job for job in Job.objects.filter(pk__in=ids, state=JobState.QUEUED).defer("env")}
    return {pid: (latest[pid][0], stopping_now.get(pid, 0), job_snapshot(jobs[pid])) for pid in ids if pid in jobs}


def running(*, below: int, now: datetime) -> list[Running]:
    """The active attempts of jobs of a class below `below` (the only ones a job of class `below` may preempt)."""
    rows = list(
        Attempt.objects.filter(state__in=ATTEMPT_ACTIVE, node__isnull=False, job__priority_value__lt=below)
        .filter(job__current_attempt=F("pk"))
        .values(
            "pk", "job_id", "job__project_id", "node_id", "job__priority_value", "cpu_milli", "memory_bytes",
            "disk_bytes", "gpu_uuids", "started_at", "state", "stop_reason", "job__preempt_immune",
        )
    )  # fmt: skip
    if not rows:
        return []
    counts = dict(
        Preemption.objects.filter(victim_id__in={row["job_id"] for row in rows}, created_at__gt=now - HOUR)
        .values("victim_id")
        .annotate(n=Count("id"))
        .values_list("victim_id", "n")
    )
    return [
        Running(
            attempt_id=row["pk"],
            job_id=row["job_id"],
            project_id=row["job__project_id"],
            node_id=row["node_id"],
            priority_value=row["job__priority_value"],
            cpu_milli=row["cpu_milli"],
            memory_bytes=row["memory_bytes"],
            disk_bytes=row["disk_bytes"],
            gpu_uuids=tuple(row["gpu_uuids"] or ()),
            started_at=row["started_at"].timestamp() if row["started_at"] and row["state"] == "running" else None,
            preempted_last_hour=counts.get(row["job_id"], 0),
            immune=row["job__preempt_immune"],
            stopping=bool(row["stop_reason"]),
        )
        for row in rows
    ]


def lowest_active_class() -> int | None:
    """The lowest class of any job holding an attempt now (None: none): a batch whose classes are all at or below it
    cannot preempt, and skips reading the running attempts."""
    return _LOWEST_ACTIVE.first()


_LOWEST_ACTIVE = Prepared(  # the least of a column: its first in order (an aggregate would be a GROUP BY here)
    lambda: (
        Attempt.objects.filter(state__in=ATTEMPT_ACTIVE)
        .order_by("job__priority_value")
        .values_list("job__priority_value", flat=True)[:1]
    )
)


def apply(decisions, *, jobs: dict[int, Job], names: dict[int, str], now: datetime) -> int:
    """Stop each decision's victims (jobs.stopping: their grace, then back to the queue, retry budget untouched) and
    record the preemptions; the node is held for the preemptor from here on. Returns how many victims were asked."""
    asked = 0
    max_per_hour = settings.EULER_PREEMPT_MAX_PER_HOUR
    for decision in decisions:
        decision: Decision
        preemptor = jobs[decision.job_id]
        label = preemptor.priority_class or "default"
        by = f"job {preemptor.pk} (priority class {label}, {preemptor.priority_value})"
        for victim in decision.victims:
            job = transitions.lock(victim.job_id)
            attempt = Attempt.objects.filter(pk=victim.attempt_id).first()
            if job is None or attempt is None or job.current_attempt_id != attempt.pk:
                continue
            attempt.job = job
            if not stopping.request_stop(
                attempt,
                reason=stopping.Reason.PREEMPT,
                requeue=True,
                count_as_failure=False,
                by=by,
                message=f"preempted for job {preemptor.pk} of a higher priority class",
                now=now,
            ):
                continue
            Preemption.objects.create(
                preemptor=preemptor,
                victim=job,
                victim_attempt=attempt,
                node_id=decision.node_id,
                node_name=names.get(decision.node_id, "")[:63],
                preemptor_class=preemptor.priority_class,
                preemptor_value=preemptor.priority_value,
                victim_value=job.priority_value,
                created_at=now,
            )
            if victim.preempted_last_hour + 1 >= max_per_hour and not job.preempt_immune:
                Job.objects.filter(pk=job.pk).update(preempt_immune=True)  # no more preemptions until it ends
            asked += 1
    return asked
