"""Job usage in the quota ledger: CPU core-seconds and GPU-seconds of each attempt that ran, booked by
UTC day when the attempt ends; and the budget check that refuses new jobs once a budget is spent."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F

from euler.errors import QuotaExceeded


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


def _add(project_id: int, day: date, resource: str, amount: float) -> None:
    from quotas.models import UsageEntry

    key = {"project_id": project_id, "day": day, "resource": resource, "agent_name": ""}
    if UsageEntry.objects.filter(**key).update(amount=F("amount") + amount):
        return
    try:
        with transaction.atomic():
            UsageEntry.objects.create(amount=amount, **key)
    except IntegrityError:  # created meanwhile by another writer
        UsageEntry.objects.filter(**key).update(amount=F("amount") + amount)


def book_attempt(*, project_id: int, cpu_milli: int, gpu_count: int, started_at, ended_at) -> None:
    """Book an ended attempt's usage (attempts that never started used nothing)."""
    if started_at is None or ended_at is None or ended_at <= started_at:
        return
    for day, seconds in split_by_day(started_at, ended_at):
        for resource, amount in attempt_amounts(cpu_milli=cpu_milli, gpu_count=gpu_count, seconds=seconds).items():
            _add(project_id, day, resource, amount)


def check_budget(*, project, gpu_count: int) -> None:
    """429 quota_exceeded when the period's CPU budget (or GPU budget, for a GPU job) is spent."""
    from quotas.models import Quota
    from quotas.selectors import project_usage

    quota = Quota.objects.filter(project=project).first()
    if quota is None:
        return
    used = project_usage(project)
    grace = 1 + settings.EULER_QUOTA_GRACE
    wanted = [("cpu_core_seconds", quota.cpu_core_seconds)]
    if gpu_count:
        wanted.append(("gpu_seconds", quota.gpu_seconds))
    for resource, limit in wanted:
        if used.get(resource, 0.0) >= limit * grace:
            raise QuotaExceeded(
                f"The project has used its {resource.replace('_', ' ')} budget for this period "
                f"({used[resource]:.0f} of {limit}).",
                extra={"resource": resource},
            )
