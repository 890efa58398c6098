"""A lender's terms as the scheduler reads them (pure): availability windows in the lender's zone, and caps.

Windows are weekly: `{"days": ["mon", …], "start": "20:00", "end": "08:00"}` opens on each listed day at
`start` (the lender's local time) and closes at `end`, the next day when `end` is not after `start`
("00:00"–"00:00" is the whole day). Overlapping or touching windows join: weekday nights and whole weekends
make one open stretch from Friday 20:00 to Monday 08:00.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
HORIZON_DAYS = 8  # windows are laid out this far around now: an open stretch reads at most this long


def parse_hhmm(text: str) -> time:
    """Parse "HH:MM" (00:00–23:59, or 24:00 for midnight at the end); ValueError otherwise."""
    hh, sep, mm = str(text).partition(":")
    if not sep or len(hh) != 2 or len(mm) != 2 or not (hh + mm).isdigit():
        raise ValueError(text)
    h, m = int(hh), int(mm)
    if (h, m) == (24, 0):
        return time(0, 0)
    if h > 23 or m > 59:
        raise ValueError(text)
    return time(h, m)


def intervals(windows: list[dict], zone: str, now: datetime) -> list[tuple[datetime, datetime]]:
    """The open stretches around `now` (aware datetimes), sorted and merged."""
    tz = ZoneInfo(zone)
    today = now.astimezone(tz).date()
    spans = []
    for offset in range(-HORIZON_DAYS, HORIZON_DAYS + 1):
        day = today + timedelta(days=offset)
        name = DAYS[day.weekday()]
        for w in windows:
            if name not in w["days"]:
                continue
            start, end = parse_hhmm(w["start"]), parse_hhmm(w["end"])
            opens = datetime.combine(day, start, tzinfo=tz)
            closes = datetime.combine(day + timedelta(days=1) if end <= start else day, end, tzinfo=tz)
            spans.append((opens, closes))
    spans.sort()
    merged: list[list[datetime]] = []
    for opens, closes in spans:
        if merged and opens <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], closes)
        else:
            merged.append([opens, closes])
    return [(a, b) for a, b in merged]


def window_state(windows: list[dict], zone: str, now: datetime) -> tuple[bool, float | None, datetime | None]:
    """(open now, seconds until it closes, when it next opens). No windows: always open, never closes."""
    if not windows:
        return True, None, None
    for opens, closes in intervals(windows, zone, now):
        if opens <= now < closes:
            return True, (closes - now).total_seconds(), None
        if opens > now:
            return False, None, opens
    return False, None, None


def fits_window(*, left: float | None, timeout: float, checkpoint_lead: float | None) -> bool:
    """A job may start on a node whose window closes in `left` seconds (None: no window closes) when it can end by
    its timeout before the close, or when it declares a checkpoint and the close is further than its stop's lead
    (`checkpoint_lead`: its grace and the window pass's period): it is then stopped with its grace before the close,
    its checkpoint taken, and requeued to resume elsewhere (lending/windows.py). Pure."""
    if left is None or timeout <= left:
        return True
    return checkpoint_lead is not None and left > checkpoint_lead


def capped(offered: int, cap: int | None) -> int:
    """What the scheduler may use: the offered figure, never above the lender's cap (a cap never raises it)."""
    return offered if cap is None else max(0, min(offered, cap))


def capped_disk(offered: int | None, cap: int | None) -> int | None:
    """Disk: a node that reports none is not counted, unless its lender caps it."""
    if cap is None:
        return offered
    return max(0, cap) if offered is None else capped(offered, cap)


@dataclass(frozen=True, slots=True)
class Read:
    open: bool = True
    left: float | None = None
    projects: frozenset[int] | None = None
    max_seconds: float | None = None
    max_cpu_milli: int | None = None
    max_memory_bytes: int | None = None
    max_gpus: int | None = None
    max_disk_bytes: int | None = None


NONE = Read()


def read(terms: dict | None, *, now: datetime) -> Read:
    """A node's stored terms (Node.lender_terms, validated by lending/terms.py) as the scheduler uses them now.
    Terms that cannot be read (a zone this host lacks) close the node rather than ignore the lender."""
    if not terms:
        return NONE
    try:
        is_open, left, _ = window_state(terms.get("windows") or [], terms.get("timezone") or "UTC", now)
    except (ValueError, KeyError, TypeError, ZoneInfoNotFoundError):
        is_open, left = False, None
    ids = terms.get("allowed_project_ids") or []
    hours = terms.get("max_job_hours")
    return Read(
        open=is_open,
        left=left,
        projects=frozenset(ids) if ids else None,
        max_seconds=None if hours is None else float(hours) * 3600,
        max_cpu_milli=terms.get("max_cpu_milli"),
        max_memory_bytes=terms.get("max_memory_bytes"),
        max_gpus=terms.get("max_gpus"),
        max_disk_bytes=terms.get("max_disk_bytes"),
    )
