"""Job usage in the quota ledger: CPU core-seconds and GPU-seconds of each running attempt, booked by UTC
day as heartbeats arrive and when the attempt ends (each second exactly once), and the budget check that
refuses new jobs once a budget is spent (jobs.budgets stops running jobs past the grace)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from django.db import transaction

from euler import writes
from euler.errors import QuotaExceeded
from euler.prepared import Prepared
from quotas.ledger import ledger_add


def split_by_day(start: datetime, end: datetime) -> list[tuple[date, float]]:
    """Seconds of [start, end) in each UTC day (pure)."""
    start, end = start.astimezone(UTC), end.astimezone(UTC)
    parts = []
    while start < end:
        midnight = datetime(start.year, start.month, start.day, tzinfo=UTC) + timedelta(days=1)
        stop = min(end, midnight)
        parts.append((start.date(), (stop - start).total_seconds()))
        start = stop
    return parts


def attempt_amounts(*, cpu_milli: int, gpu_count: int, seconds: float) -> dict[str, float]:
    """What an attempt of this size consumed in `seconds` (pure)."""
    amounts = {"cpu_core_seconds": cpu_milli / 1000 * seconds}
    if gpu_count:
        amounts["gpu_seconds"] = gpu_count * seconds
    return amounts


def book_attempt(*, project_id: int, cpu_milli: int, gpu_count: int, started_at, ended_at) -> None:
    """Book an ended attempt's usage (attempts that never started used nothing)."""
    if started_at is None or ended_at is None or ended_at <= started_at:
        return
    for day, seconds in split_by_day(started_at, ended_at):
        for resource, amount in attempt_amounts(cpu_milli=cpu_milli, gpu_count=gpu_count, seconds=seconds).items():
            ledger_add(project_id=project_id, resource=resource, amount=amount, day=day)


# Running attempts are booked at most this often from heartbeats (the end report books the rest), so
# most heartbeats cost no metering query at all.
METER_EVERY = timedelta(seconds=30)


def meter_due(row: dict, now: datetime) -> bool:
    """Whether a running attempt's usage mark is old enough to book again (pure; row has started_at,
    metered_until)."""
    mark = row["metered_until"] or row["started_at"]
    return mark is not None and now - mark >= METER_EVERY


METER_FIELDS = ("started_at", "metered_until", "cpu_milli", "gpu_uuids", "job__project_id")


def meter_row(attempt, *, project_id: int) -> dict:
    """METER_FIELDS from an attempt row already read (and locked) by the caller, its job's project given."""
    row = {f: getattr(attempt, f) for f in METER_FIELDS if "__" not in f}
    row["job__project_id"] = project_id
    return row


def meter(*, attempt_id: int, until: datetime, row: dict | None = None) -> float:
    """Book the attempt's usage from where it was last metered up to `until`; returns the seconds booked.

    A compare-and-set on `metered_until` makes replayed or concurrent heartbeats and reports harmless:
    whoever moves the mark books that span, everyone else books nothing. `row`: the attempt's METER_FIELDS
    where the caller already read them (the ending holds the row locked); else they are read here.
    """
    from jobs.models import Attempt

    if row is None:
        row = Attempt.objects.filter(pk=attempt_id).values(*METER_FIELDS).first()
    if row is None or row["started_at"] is None:
        return 0.0
    since = row["metered_until"] or row["started_at"]
    if until <= since:
        return 0.0
    with transaction.atomic(savepoint=False):  # the caller's transaction, when there is one, is the unit
        # The mark moves only from where it was read (None: IS NULL).
        if writes.update_where(Attempt, attempt_id, {"metered_until": until}, metered_until=row["metered_until"]) != 1:
            return 0.0
        book_attempt(
            project_id=row["job__project_id"],
            cpu_milli=row["cpu_milli"],
            gpu_count=len(row["gpu_uuids"] or []),
            started_at=since,
            ended_at=until,
        )
    return (until - since).total_seconds()


def _quota(project_id):
    from quotas.models import Quota

    return Quota.objects.filter(project_id=project_id).order_by("pk").values_list("cpu_core_seconds", "gpu_seconds")[:1]


_QUOTA = Prepared(_quota)  # every submit reads it (euler/prepared.py)


def check_budget(*, project, gpu_count: int) -> None:
    """429 quota_exceeded when the period's CPU budget (or GPU budget, for a GPU job) is spent. `project`: the
    project or its id."""
    from quotas.selectors import ledger_usage

    project_id = getattr(project, "pk", project)
    quota = _QUOTA.first(project_id)
    if quota is None:
        return
    wanted = [("cpu_core_seconds", quota[0])]
    if gpu_count:
        wanted.append(("gpu_seconds", quota[1]))
    used = ledger_usage(project_id, [resource for resource, _ in wanted])  # no live invocations: jobs only
    for resource, limit in wanted:
        if used[resource] >= limit:
            raise QuotaExceeded(
                f"The project has used its {resource.replace('_', ' ')} budget for this period "
                f"({used[resource]:.0f} of {limit}).",
                extra={"resource": resource},
            )
