"""Schedules: create, change, delete, and the tick that submits each due schedule's job exactly once per tick.

Exactly once: a run is a ScheduleRun row, unique on (schedule, tick), inserted in the same transaction as the
job it submits; a second process (another beat, another worker) that reaches the same tick fails the insert
and submits nothing. The row lock (SKIP LOCKED) only keeps two processes from doing the work twice before one
of them loses on the constraint. Missed ticks: workflows/cron.py (one catch-up run for the latest).
"""

from __future__ import annotations

import logging
import time
from datetime import datetime

from django.db import IntegrityError, transaction
from django.db.models import F, FloatField, Sum, Window
from django.db.models.functions import Cast, RowNumber
from django.utils import timezone

import audit
from euler.errors import Conflict, EulerError, InvalidInput, QuotaExceeded
from jobs import services as job_services
from jobs.states import TERMINAL
from quotas import scoped
from quotas.models import Quota
from workflows import cron, fairness
from workflows.models import Overlap, RunOutcome, Schedule, ScheduleRun

log = logging.getLogger(__name__)


def get_schedule(*, project, name: str) -> Schedule:
    return scoped.schedule(project=project, name=name)


def _check_cron(expression: str, tz: str) -> None:
    try:
        cron.check(expression, tz)
    except cron.CronError as exc:
        raise InvalidInput(str(exc), code=exc.code) from None


def _next(schedule: Schedule, now: datetime) -> datetime | None:
    return cron.next_tick(schedule.cron, schedule.timezone, after=now) if schedule.enabled else None


GAP_TICKS = 64  # ticks looked at for a cron's shortest gap (a minute-long burst once a year shows in them)


def min_period(expression: str, tz: str, *, now: datetime) -> int | None:
    """The shortest gap in seconds between two of the next GAP_TICKS ticks (None: fewer than two ticks)."""
    ticks, at = [], now
    for _ in range(GAP_TICKS):
        at = cron.next_tick(expression, tz, after=at)
        if at is None:
            break
        ticks.append(at)
    gap = fairness.shortest_gap(ticks)
    return None if gap is None else int(gap)


def _refuse_array(spec: dict | None) -> None:
    if spec and spec.get("array"):
        raise InvalidInput("A schedule submits one job per tick: `array` is not taken in a schedule's job (submit "
                           "an array from a job the schedule runs, or one schedule per task).",
                           code="schedule_array_unsupported")  # fmt: skip


def _check_limits(schedule: Schedule, *, new: bool) -> None:
    """The project's schedule limits (quotas.Quota), under the quota row's lock so that two creates cannot both
    take the last place. 429 schedule_limit / schedule_rate_limit, 400 schedule_period_too_short."""
    quota = Quota.objects.select_for_update().filter(project_id=schedule.project_id).first()
    if quota is None:
        return
    limits = fairness.ScheduleLimits(quota.max_schedules, quota.schedule_min_period, quota.schedule_runs_per_minute)
    others = scoped.schedules(project=schedule.project_id).exclude(pk=schedule.pk)
    rate = (
        others.filter(enabled=True, min_period__gt=0).aggregate(r=Sum(60.0 / Cast(F("min_period"), FloatField())))["r"]
        or 0.0
    )
    refusal = fairness.check_schedule(
        limits, others=others.count(), others_rate=rate, gap=schedule.min_period, enabled=schedule.enabled, new=new
    )
    if refusal is not None:
        error = QuotaExceeded if refusal.status == 429 else InvalidInput
        raise error(refusal.message[:1].upper() + refusal.message[1:], code=refusal.code)


@transaction.atomic
def schedule_create(*, project, fields: dict, spec: dict, by=None) -> Schedule:
    """`fields`: name, cron, timezone, overlap, enabled; `spec`: a validated job submission (env included)."""
    _check_cron(fields["cron"], fields["timezone"])
    _refuse_array(spec)
    job_services.check_references(project=project, spec=spec)
    env = spec.pop("env", None) or None
    schedule = Schedule(project=project, spec=spec, env=env, created_by=by, **fields)
    now = timezone.now()
    schedule.next_tick_at = _next(schedule, now)
    schedule.min_period = min_period(schedule.cron, schedule.timezone, now=now)
    _check_limits(schedule, new=True)
    try:
        with transaction.atomic():
            schedule.save()
    except IntegrityError:
        raise Conflict(f"A schedule named {fields['name']!r} already exists.", code="name_taken") from None
    audit.record("schedule.created", project=project, target=f"schedule:{schedule.name}",
                 details={"cron": schedule.cron, "timezone": schedule.timezone}, by=by)  # fmt: skip
    return schedule


@transaction.atomic
def schedule_update(*, schedule: Schedule, fields: dict, spec: dict | None = None, by=None) -> Schedule:
    """Change fields (and the job spec); the next tick is computed again from now."""
    schedule = scoped.schedules(project=schedule.project_id).select_for_update().get(pk=schedule.pk)
    for key, value in fields.items():
        setattr(schedule, key, value)
    _check_cron(schedule.cron, schedule.timezone)
    _refuse_array(spec)
    if spec is not None:
        job_services.check_references(project=schedule.project, spec=spec)
        schedule.env = spec.pop("env", None) or None
        schedule.spec = spec
    now = timezone.now()
    schedule.next_tick_at = _next(schedule, now)
    schedule.min_period = min_period(schedule.cron, schedule.timezone, now=now)
    _check_limits(schedule, new=False)
    schedule.save()
    audit.record("schedule.changed", project=schedule.project, target=f"schedule:{schedule.name}",
                 details={"fields": sorted(fields) + (["job"] if spec is not None else [])}, by=by)  # fmt: skip
    return schedule


def schedules_of_departed_member(*, project_id: int, user_id: int, username: str) -> int:
    """Disable the enabled schedules that a departing member created in the project (they would keep submitting
    as someone who is no longer there), each with an audit entry; inside the caller's transaction (the
    membership's removal). Returns how many."""
    mine = scoped.schedules(project=project_id)
    rows = list(mine.select_for_update().filter(created_by_id=user_id, enabled=True))
    for schedule in rows:
        mine.filter(pk=schedule.pk).update(enabled=False, next_tick_at=None, updated_at=timezone.now())
        audit.record("schedule.disabled", project=project_id, target=f"schedule:{schedule.name}",
                     details={"reason": "member_removed", "member": username})  # fmt: skip
    return len(rows)


@transaction.atomic
def schedule_delete(*, schedule: Schedule, by=None) -> None:
    audit.record("schedule.deleted", project=schedule.project, target=f"schedule:{schedule.name}", by=by)
    schedule.delete()


def _active_jobs(schedule: Schedule):
    runs = ScheduleRun.objects.filter(schedule=schedule, job__isnull=False).values("job_id")
    return scoped.jobs(project=schedule.project_id).filter(pk__in=runs).exclude(state__in=TERMINAL)


def _submit(schedule: Schedule, run: ScheduleRun) -> None:
    """The run's job, by the overlap policy; the run row says what happened."""
    active = list(_active_jobs(schedule).values_list("pk", flat=True))
    if active and schedule.overlap == Overlap.SKIP:
        run.outcome, run.message = RunOutcome.SKIPPED, f"job {active[0]} of an earlier run is still active"
        return
    if active and schedule.overlap == Overlap.CANCEL_PREVIOUS:
        for job_id in active:
            try:
                job_services.job_cancel(job_id=job_id, project=schedule.project)
            except EulerError:
                pass  # it ended meanwhile
    if schedule.spec.get("array"):  # stored before schedules refused it: say so instead of one job
        run.outcome = RunOutcome.REFUSED
        run.message = "schedule_array_unsupported: a schedule submits one job per tick, not an array"
        return
    spec = {**schedule.spec, "env": schedule.env or {}}
    try:
        with transaction.atomic():
            job = job_services.job_submit(project=schedule.project, spec=spec, by=schedule.created_by)
    except EulerError as exc:
        run.outcome, run.message = RunOutcome.REFUSED, f"{exc.code}: {exc.message}"[:1000]
        return
    run.job, run.outcome = job, RunOutcome.SUBMITTED
    if active and schedule.overlap == Overlap.CANCEL_PREVIOUS:
        run.message = "cancelled " + ", ".join(f"job {pk}" for pk in active)


def run_one(schedule_id: int, *, now: datetime) -> ScheduleRun | None:
    """The due tick of one schedule, in one transaction; None when not due, locked elsewhere or already run."""
    with transaction.atomic():
        schedule = (
            Schedule.objects.select_for_update(skip_locked=True)
            .filter(pk=schedule_id, enabled=True, next_tick_at__lte=now)
            .first()
        )
        if schedule is None:
            return None
        tick, following = cron.due(schedule.cron, schedule.timezone, next_at=schedule.next_tick_at, now=now)
        run = None
        if tick is not None:
            run = ScheduleRun(schedule=schedule, tick=tick, outcome=RunOutcome.SUBMITTED,
                              catch_up=tick != schedule.next_tick_at)  # fmt: skip
            try:
                with transaction.atomic():
                    run.save()  # the exactly-once point: unique (schedule, tick)
            except IntegrityError:
                run = None  # another process ran this tick
            if run is not None:
                _submit(schedule, run)
                if run.catch_up and not run.message:
                    run.message = f"catch-up run: ticks from {schedule.next_tick_at.isoformat()} were missed"
                run.save(update_fields=["job", "outcome", "message"])
            schedule.last_tick_at = tick
        schedule.next_tick_at = following
        schedule.save(update_fields=["next_tick_at", "last_tick_at", "updated_at"])
        return run


QUANTUM = 20  # due schedules of one project read per round of a pass


def due_round(*, now: datetime, quantum: int = QUANTUM) -> list[int]:
    """The due schedules of every project, at most `quantum` each, in turns (fairness.interleave): projects
    whose oldest due tick is the oldest go first in each turn, each project's schedules oldest tick first."""
    ranked = (
        Schedule.objects.filter(enabled=True, next_tick_at__lte=now)
        .annotate(rank=Window(RowNumber(), partition_by=[F("project_id")], order_by=[F("next_tick_at"), F("pk")]))
        .filter(rank__lte=quantum)
        .values_list("project_id", "pk", "next_tick_at")
    )
    groups: dict[int, list[int]] = {}
    oldest: dict[int, datetime] = {}
    for project_id, pk, tick in sorted(ranked, key=lambda r: (r[2], r[1])):
        groups.setdefault(project_id, []).append(pk)
        oldest.setdefault(project_id, tick)
    return fairness.interleave(groups, order=sorted(groups, key=lambda p: (oldest[p], p)))


def run_due(*, now: datetime | None = None, budget: float = 2.0, quantum: int = QUANTUM) -> int:
    """Due schedules' ticks, fairly per project (due_round), for about `budget` seconds: a project with thousands
    due takes one turn per round like a project with one. Returns how many runs this process recorded."""
    started = time.monotonic()
    count, tried = 0, set()
    while time.monotonic() - started < budget:
        now_ = now or timezone.now()
        batch = [pk for pk in due_round(now=now_, quantum=quantum) if pk not in tried]
        if not batch:
            break
        for schedule_id in batch:
            if time.monotonic() - started >= budget:
                break
            tried.add(schedule_id)
            try:
                count += run_one(schedule_id, now=now_) is not None
            except Exception:  # noqa: BLE001 - one broken schedule must not stop the others
                log.exception("schedule %s: tick failed", schedule_id)
    return count
