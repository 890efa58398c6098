"""Pure parts of schedules and webhooks: cron ticks in a time zone, the catch-up rule, event names, signatures."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from workflows import cron, events, signing


def utc(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


def test_ticks_are_computed_in_the_schedules_time_zone():
    # 09:00 in Shanghai is 01:00 UTC
    assert cron.next_tick("0 9 * * *", "Asia/Shanghai", after=utc(2026, 12, 2, 0, 0)) == utc(2026, 12, 2, 1, 0)
    # 09:00 in Berlin is 08:00 UTC in winter, 07:00 UTC in summer
    assert cron.next_tick("0 9 * * *", "Europe/Berlin", after=utc(2026, 12, 2, 12)) == utc(2026, 12, 3, 8, 0)
    assert cron.next_tick("0 9 * * *", "Europe/Berlin", after=utc(2026, 7, 2, 12)) == utc(2026, 7, 3, 7, 0)


def test_the_next_tick_is_strictly_after_and_the_latest_is_at_or_before():
    at = utc(2026, 12, 2, 12, 0)
    assert cron.next_tick("* * * * *", "UTC", after=at) == utc(2026, 12, 2, 12, 1)
    assert cron.latest_tick("* * * * *", "UTC", at=at) == at
    assert cron.latest_tick("*/15 * * * *", "UTC", at=utc(2026, 12, 2, 12, 14, 59)) == at


def test_a_tick_not_yet_come_is_not_due():
    assert cron.due("* * * * *", "UTC", next_at=utc(2026, 12, 2, 12, 1), now=utc(2026, 12, 2, 12, 0, 30)) == (
        None,
        utc(2026, 12, 2, 12, 1),
    )


def test_a_due_tick_runs_and_the_next_one_follows():
    tick, following = cron.due("* * * * *", "UTC", next_at=utc(2026, 12, 2, 12, 1), now=utc(2026, 12, 2, 12, 1, 2))
    assert (tick, following) == (utc(2026, 12, 2, 12, 1), utc(2026, 12, 2, 12, 2))


def test_ticks_missed_while_down_give_one_catch_up_run_for_the_latest():
    # down from 12:01 to 15:30:20: 210 ticks missed, one run (15:30), then 15:31
    tick, following = cron.due("* * * * *", "UTC", next_at=utc(2026, 12, 2, 12, 1), now=utc(2026, 12, 2, 15, 30, 20))
    assert (tick, following) == (utc(2026, 12, 2, 15, 30), utc(2026, 12, 2, 15, 31))


@pytest.mark.parametrize("expr", ["", "* * *", "61 * * * *", "x y z a b", "* " * 60, "* * * * * *", "@daily"])
def test_bad_cron_expressions_are_refused_with_a_code(expr):
    with pytest.raises(cron.CronError) as exc:
        cron.check(expr, "UTC")
    assert exc.value.code == "invalid_cron"


@pytest.mark.parametrize("tz", ["", "Mars/Olympus", "../etc/passwd", "utc+8", 5])
def test_unknown_time_zones_are_refused_with_a_code(tz):
    with pytest.raises(cron.CronError) as exc:
        cron.check("* * * * *", tz)
    assert exc.value.code == "invalid_timezone"


def test_event_names_and_groups_match_the_states_they_say():
    assert events.normalize(["job.failed", "job.ended", "job.failed"]) == ["job.ended", "job.failed"]
    assert events.matches(["job.ended"], "lost") and not events.matches(["job.ended"], "running")
    assert events.matches(["job.state_changed"], "queued") and events.matches(["job.state_changed"], "someday")
    assert events.matches(["job.waiting"], "waiting")
    assert events.matches(["job.failed"], "failed") and not events.matches(["job.failed"], "succeeded")
    for bad in ([], ["job.exploded"], "job.ended", [1]):
        with pytest.raises(events.EventError):
            events.normalize(bad)


def test_a_signature_verifies_with_its_secret_and_timestamp_only():
    secret, body, t = signing.new_secret(), b'{"id":"evt_1"}', 1_790_000_000
    header = signing.header(secret, t, body)
    assert header.startswith(f"t={t},v1=") and len(header.split("v1=")[1]) == 64
    assert signing.verify(secret, header, body, now=t + 10)
    assert not signing.verify(secret, header, body + b" ", now=t)  # body changed
    assert not signing.verify("whsec_other", header, body, now=t)  # another secret
    assert not signing.verify(secret, header, body, now=t + 301)  # a replay, too late
    assert not signing.verify(secret, header.replace(f"t={t}", f"t={t + 1}"), body, now=t)  # timestamp changed
    assert not signing.verify(secret, "garbage", body, now=t)
    # the reference computation a receiver writes
    import hashlib
    import hmac

    expected = hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    assert header == f"t={t},v1={expected}"
