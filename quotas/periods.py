"""Quota periods: calendar months in UTC (pure)."""

from __future__ import annotations

from datetime import UTC, datetime


def period_bounds(now: datetime) -> tuple[datetime, datetime]:
    now = now.astimezone(UTC)
    start = datetime(now.year, now.month, 1, tzinfo=UTC)
    end = (
        datetime(now.year + 1, 1, 1, tzinfo=UTC)
        if now.month == 12
        else datetime(now.year, now.month + 1, 1, tzinfo=UTC)
    )
    return start, end
