"""Availability windows and caps as the scheduler reads them (jobs/scheduling/terms.py, pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from jobs.scheduling import terms

NIGHTS = [{"days": ["mon", "tue", "wed", "thu", "fri"], "start": "20:00", "end": "08:00"}]
WEEKENDS = [{"days": ["sat", "sun"], "start": "00:00", "end": "00:00"}]
SHANGHAI = "Asia/Shanghai"  # UTC+8, no daylight saving


def at(text: str) -> datetime:
    """A Shanghai wall-clock time as an aware UTC datetime (2026-12-07 is a Monday)."""
    return (datetime.fromisoformat(text) - timedelta(hours=8)).replace(tzinfo=UTC)


def test_a_weekday_night_window_is_open_at_night_and_says_when_it_closes():
    is_open, left, _ = terms.window_state(NIGHTS, SHANGHAI, at("2026-12-07T23:00"))
    assert is_open and left == 9 * 3600


def test_it_is_closed_by_day_and_says_when_it_opens():
    is_open, left, opens = terms.window_state(NIGHTS, SHANGHAI, at("2026-12-07T12:00"))
    assert (is_open, left) == (False, None) and opens == at("2026-12-07T20:00")


def test_touching_windows_join_friday_night_through_the_weekend():
    is_open, left, _ = terms.window_state(NIGHTS + WEEKENDS, SHANGHAI, at("2026-12-11T21:00"))  # a Friday
    assert is_open and left == (3 + 2 * 24) * 3600  # until Monday 00:00: a window belongs to the day it opens,
    sundays = NIGHTS + WEEKENDS + [{"days": ["sun"], "start": "20:00", "end": "08:00"}]  # so Sunday's night is its own
    assert terms.window_state(sundays, SHANGHAI, at("2026-12-11T21:00"))[1] == (3 + 2 * 24 + 8) * 3600


def test_no_windows_means_always_open():
    assert terms.window_state([], SHANGHAI, at("2026-12-07T12:00")) == (True, None, None)


def test_times_read_as_hh_mm():
    assert terms.parse_hhmm("24:00") == terms.parse_hhmm("00:00")
    for bad in ("8:00", "24:01", "12:60", "noon", ""):
        with pytest.raises(ValueError):
            terms.parse_hhmm(bad)


def test_caps_only_ever_lower_what_a_node_offers():
    assert terms.capped(8000, 4000) == 4000
    assert terms.capped(8000, 16000) == 8000
    assert terms.capped(8000, None) == 8000
    assert terms.capped_disk(None, None) is None and terms.capped_disk(None, 10) == 10
    assert terms.capped_disk(5, 10) == 5


def test_read_turns_stored_terms_into_what_the_filters_use():
    stored = {"timezone": SHANGHAI, "windows": NIGHTS, "allowed_project_ids": [3], "max_job_hours": 2}
    read = terms.read(stored, now=at("2026-12-07T23:00"))
    assert (read.open, read.left, read.projects, read.max_seconds) == (True, 9 * 3600, frozenset({3}), 7200.0)
    assert terms.read({}, now=at("2026-12-07T23:00")) == terms.NONE


def test_terms_that_cannot_be_read_close_the_node_rather_than_ignore_the_lender():
    read = terms.read({"timezone": "Mars/Olympus", "windows": NIGHTS}, now=at("2026-12-07T23:00"))
    assert read.open is False
