"""Schedules: create, change, delete, and the tick that submits each due schedule's job exactly once per tick.

Exactly once: a run is a ScheduleRun row, unique on (schedule, tick), inserted in the same transaction as the
job it submits; a second process (another beat, another worker) that reaches the same tick fails the insert
and submits nothing. The row lock (SKIP LOCKED) only keeps two processes from doing the work twice before one
of them loses on the constraint. Missed ticks: workflows/cron.py (one catch-up run for the latest).
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import IntegrityError, transaction
from django.utils import timezone

import audit
from euler.errors import Conflict, EulerError, InvalidInput
from jobs import services as job_services
from jobs.states import TERMINAL
from quotas import scoped
from workflows import cron
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


@transaction.atomic
def schedule_create(*, project, fields: dict, spec: dict, by=None) -> Schedule:
    """`fields`: name, cron, timezone, overlap, enabled; `spec`: a validated job submission (env included)."""
    _check_cron(fields["cron"], fields["timezone"])
    job_services.check_references(project=project, spec=spec)
    env = spec.pop("env", None) or None
    schedule = Schedule(project=project, spec=spec, env=env, created_by=by, **fields)
    schedule.next_tick_at = _next(schedule, timezone.now())
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
    if spec is not None:
        job_services.check_references(project=schedule.project, spec=spec)
        schedule.env = spec.pop("env", None) or None
        schedule.spec = spec
    schedule.next_tick_at = _next(schedule, timezone.now())
    schedule.save()
    audit.record("schedule.changed", project=schedule.project, target=f"schedule:{schedule.name}",
                 details={"fields": sorted(fields) + (["job"] if spec is not None else [])}, by=by)  # fmt: skip
    return schedule


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


def run_due(*, now: datetime | None = None, limit: int = 200) -> int:
    """Every due schedule's tick (at most `limit`); returns how many runs this process recorded."""
    now = now or timezone.now()
    due = Schedule.objects.filter(enabled=True, next_tick_at__lte=now).order_by("next_tick_at")
    count = 0
    for schedule_id in list(due.values_list("pk", flat=True)[:limit]):
        try:
            count += run_one(schedule_id, now=now) is not None
        except Exception:  # noqa: BLE001 - one broken schedule must not stop the others
            log.exception("schedule %s: tick failed", schedule_id)
    return count
