"""Cron ticks, pure: the next tick after an instant and the one tick that is due (cronsim, IANA time zones).

Ticks are computed in the schedule's time zone (so `0 9 * * *` is 09:00 local across daylight saving changes,
cronsim's rules: a local time skipped by the spring change fires at the first instant after it, a repeated one
fires once) and stored in UTC.

The catch-up rule: when the tick task finds a schedule whose next tick has passed, it runs ONE job, for the
latest tick that has passed, however many were missed (the platform was down, beat was stopped), and then
waits for the next tick after now. A run is keyed by its tick, so it happens at most once.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from cronsim import CronSim, CronSimError

MAX_EXPRESSION = 100


class CronError(ValueError):
    def __init__(self, message: str, code: str):
        super().__init__(message)
        self.code = code


def zone(name: str) -> ZoneInfo:
    if not isinstance(name, str) or not name or len(name) > 64 or name not in _zones():
        raise CronError(f"time zone {str(name)[:64]!r} is not an IANA time zone name (e.g. Europe/Berlin).",
                        "invalid_timezone")  # fmt: skip
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise CronError(f"time zone {name!r} is not known here.", "invalid_timezone") from None


_ZONES: frozenset[str] | None = None


def _zones() -> frozenset[str]:
    global _ZONES
    if _ZONES is None:
        _ZONES = frozenset(available_timezones()) | {"UTC"}
    return _ZONES


def check(expression: str, timezone_name: str) -> None:
    """CronError (invalid_cron / invalid_timezone) unless the pair can be scheduled."""
    if not isinstance(expression, str) or not expression.strip() or len(expression) > MAX_EXPRESSION:
        raise CronError(f"cron is a cron expression of at most {MAX_EXPRESSION} characters.", "invalid_cron")
    if len(expression.split()) != 5:
        raise CronError("cron has five fields: minute hour day-of-month month day-of-week (e.g. '*/15 * * * *').",
                        "invalid_cron")  # fmt: skip
    tz = zone(timezone_name)
    try:
        next(CronSim(expression.strip(), datetime.now(tz)))
    except (CronSimError, StopIteration, ValueError, LookupError, TypeError) as exc:
        raise CronError(f"cron {expression[:MAX_EXPRESSION]!r} is not a valid expression: {exc}.",
                        "invalid_cron") from None  # fmt: skip


def next_tick(expression: str, timezone_name: str, *, after: datetime) -> datetime | None:
    """The first tick strictly after `after`, in UTC (None: the expression never fires again)."""
    tz = zone(timezone_name)
    try:
        return next(CronSim(expression.strip(), after.astimezone(tz))).astimezone(UTC)
    except StopIteration:
        return None


def latest_tick(expression: str, timezone_name: str, *, at: datetime) -> datetime | None:
    """The last tick at or before `at`, in UTC."""
    tz = zone(timezone_name)
    # cronsim's reverse walk yields ticks strictly before its start; ticks have whole minutes.
    start = (at + timedelta(seconds=1)).astimezone(tz)
    try:
        return next(CronSim(expression.strip(), start, reverse=True)).astimezone(UTC)
    except StopIteration:
        return None


def due(expression: str, timezone_name: str, *, next_at: datetime | None, now: datetime):
    """(tick to run now or None, the next tick to wait for). The catch-up rule above: one run for the latest
    passed tick, however many passed since `next_at`."""
    if next_at is None or next_at > now:
        return None, next_at
    tick = latest_tick(expression, timezone_name, at=now)
    if tick is None or tick < next_at:
        tick = next_at
    return tick, next_tick(expression, timezone_name, after=now)
