"""A lender's window's end (lending/windows.py): a checkpointing job may start before a close that its timeout
outlasts; attempts are stopped with their grace before the close and requeued without a retry (credited in the
ledger); after the close nothing is placed there until a window opens again."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from jobs import stopping
from jobs.scheduling import filters
from jobs.scheduling import terms as lender_terms
from jobs.scheduling.snapshots import JobSnapshot, NodeSnapshot
from jobs.states import AttemptState
from lending import windows
from lending.windows import Due, Running
from nodeagent import attempt_run, protocol

from .conftest import GIB

MONDAY_NOON = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)  # a Monday


def _closing_at(hhmm: str) -> dict:
    return {"timezone": "UTC", "windows": [{"days": ["mon"], "start": "08:00", "end": hhmm}]}


# --- placement (pure) --------------------------------------------------------------------------------------------
def test_a_job_fits_a_closing_window_by_its_timeout_or_by_its_checkpoint_with_room_for_its_stop():
    fits = lender_terms.fits_window
    assert fits(left=None, timeout=36000, checkpoint_lead=None)  # no window closes
    assert fits(left=90, timeout=30, checkpoint_lead=None)
    assert fits(left=90, timeout=90, checkpoint_lead=None)
    assert not fits(left=90, timeout=600, checkpoint_lead=None)  # no checkpoint: it could not finish
    assert fits(left=90, timeout=600, checkpoint_lead=40)  # stopped with its checkpoint 40 s before the close
    assert not fits(left=90, timeout=600, checkpoint_lead=90)  # it would be stopped as it starts
    assert not fits(left=30, timeout=600, checkpoint_lead=40)


def test_the_window_filter_reads_the_jobs_checkpoint_and_says_why():
    node = NodeSnapshot(id=1, terms_left=90.0)
    plain = JobSnapshot(id=1, project_id=1, cpu_milli=1, memory_bytes=1, timeout_seconds=600)
    checkpointing = JobSnapshot(id=2, project_id=1, cpu_milli=1, memory_bytes=1, timeout_seconds=600,
                                checkpoint_lead=40.0)  # fmt: skip
    assert filters.terms_window(node, plain) == "terms_window"
    assert filters.terms_window(node, checkpointing) is None
    assert "checkpoint" in filters.STATIC_PHRASES["terms_window"]


# --- who is stopped when (pure) ----------------------------------------------------------------------------------
def test_an_attempt_is_due_its_grace_and_one_period_before_its_windows_close():
    terms = {1: _closing_at("12:01")}  # closes in 60 s
    a = Running(attempt_id=10, job_id=100, node_id=1, grace=30)
    assert windows.due_stops(MONDAY_NOON, terms, [a], interval=10) == []  # 60 > 30 + 10
    assert windows.due_stops(MONDAY_NOON + timedelta(seconds=19), terms, [a], interval=10) == []
    assert windows.due_stops(MONDAY_NOON + timedelta(seconds=20), terms, [a], interval=10) == [Due(10, 100, 1, 40.0)]
    long_grace = Running(attempt_id=11, job_id=101, node_id=1, grace=120)
    assert windows.due_stops(MONDAY_NOON, terms, [long_grace], interval=10) == [Due(11, 101, 1, 60.0)]


def test_an_attempt_its_timeout_ends_by_the_close_is_left_to_end_and_one_past_it_is_not():
    # The scheduler placed a 10 s job with 30 s left (fits_window): the window pass, due at grace 30 + 1 s, must not
    # stop it and requeue it to be placed and stopped again (an e2e run looped so until the close).
    terms = {1: _closing_at("12:01")}
    now = MONDAY_NOON + timedelta(seconds=30)  # 30 s left
    short = Running(attempt_id=10, job_id=100, node_id=1, grace=30, ends_by=now + timedelta(seconds=10))
    at_close = Running(attempt_id=11, job_id=101, node_id=1, grace=30, ends_by=now + timedelta(seconds=30))
    past = Running(attempt_id=12, job_id=102, node_id=1, grace=30, ends_by=now + timedelta(seconds=31))
    assert windows.due_stops(now, terms, [short, at_close, past], interval=1) == [Due(12, 102, 1, 30.0)]
    closed = MONDAY_NOON + timedelta(seconds=61)
    assert windows.due_stops(closed, terms, [short], interval=1) == [Due(10, 100, 1, None)]  # closed: at once


def test_an_attempt_on_a_closed_node_is_due_at_once_and_nodes_without_windows_never():
    terms = {1: _closing_at("11:00"), 2: {"timezone": "UTC", "windows": [], "max_cpu_milli": 100}}
    on_closed = Running(attempt_id=10, job_id=100, node_id=1, grace=30)
    elsewhere = [Running(11, 101, 2, 30), Running(12, 102, 3, 30)]  # node 3 has no terms at all
    assert windows.due_stops(MONDAY_NOON, terms, [on_closed, *elsewhere], interval=10) == [Due(10, 100, 1, None)]
    unreadable = {1: {"timezone": "Mars/Olympus", "windows": _closing_at("13:00")["windows"]}}
    assert windows.due_stops(MONDAY_NOON, unreadable, [on_closed], interval=10) == [Due(10, 100, 1, None)]
    assert "closes in 40 s" in windows.why(Due(10, 100, 1, 40.0), "box")
    assert "outside" in windows.why(Due(10, 100, 1, None), "box")


def test_a_window_stop_ends_preempted_with_its_reason_and_requeues():
    stop = stopping.Stop(reason=stopping.Reason.WINDOW, requeue=True)
    assert stopping.ending(stop=stop, outcome="failed", reason="exited") == (AttemptState.PREEMPTED, "window_closed")
    assert stopping.ending(stop=stop, outcome="succeeded", reason="exited") == ("succeeded", "exited")
    assert stopping.requeue_word(stop, AttemptState.PREEMPTED) == "window_closed"
    assert stopping.requeue_word(stopping.Stop(reason="preempt", requeue=True), "preempted") == "preempted"
    assert protocol.stop_word(stopping.Reason.WINDOW) == "window"  # what the job reads in /run/euler/stop
    assert attempt_run.REASONS[stopping.Reason.WINDOW] == "window_closed"  # what the agent reports


# --- the database shell -----------------------------------------------------------------------------------------
def _window(now, *, closes_in: timedelta) -> dict:
    """A UTC window open since an hour ago that closes `closes_in` from now (rounded up to the whole minute)."""
    start = now - timedelta(hours=1)
    end = now + closes_in + timedelta(seconds=60 - (now + closes_in).second)
    days = sorted({start.strftime("%a").lower(), end.strftime("%a").lower()})
    return {"days": days, "start": start.strftime("%H:%M"), "end": end.strftime("%H:%M")}


def _set(node, **terms):
    from lending.terms import terms_set

    terms_set(node=node, data=terms, by=None)


def _job(submit_api, **over):
    body = {"name": "t", "image": "euler-test/busybox", "command": ["true"], "cpu_milli": 500,
            "memory_bytes": 64 << 20, "timeout_seconds": 60, **over}  # fmt: skip
    r = submit_api.post("/api/v1/jobs", body, format="json")
    assert r.status_code == 201, r.content
    return r.json()["id"]


def _placed(job_id) -> str | None:
    from jobs.models import Job
    from jobs.scheduling import cycle

    cycle.one_pass()
    job = Job.objects.select_related("current_attempt").get(pk=job_id)
    return job.current_attempt.node_name if job.current_attempt else job.pending_reason


@pytest.fixture
def mine(owner, project, lent_node):
    return lent_node(owner, project=project, name="mine", disk_bytes=100 * GIB, approved_disk_bytes=100 * GIB)


CKPT = {"path": "/ckpt", "interval_seconds": 60}


@pytest.mark.django_db
def test_a_checkpointing_job_starts_before_a_close_its_timeout_outlasts_unless_its_stop_would_not_fit(api, mine):
    _set(mine, windows=[_window(timezone.now(), closes_in=timedelta(seconds=90))])
    assert _placed(_job(api, timeout_seconds=600)).startswith("no node fits: 1 close their availability window")
    assert _placed(_job(api, timeout_seconds=600, checkpoint=CKPT, stop_grace_seconds=30)) == "mine"
    too_long_a_grace = _job(api, timeout_seconds=600, checkpoint=CKPT, stop_grace_seconds=300)
    assert _placed(too_long_a_grace).startswith("no node fits: 1 close their availability window")


@pytest.mark.django_db
def test_at_the_windows_end_its_attempts_stop_with_their_grace_and_requeue_credited(
    owner, project, lent_node, running_attempt
):
    from jobs import attempts
    from jobs.models import Attempt, Job, JobEvent
    from lending.models import LedgerEntry
    from nodes.models import Node

    node = lent_node(owner, project=project)
    now = timezone.now()
    _set(node, windows=[_window(now, closes_in=timedelta(seconds=90))])
    attempt = running_attempt(project, node, stop_grace_seconds=20, max_retries=0, checkpoint=CKPT)
    elsewhere = running_attempt(project, lent_node(owner, project=project), stop_grace_seconds=20)
    left = lender_terms.read(Node.objects.get(pk=node.pk).lender_terms, now=now).left
    assert windows.stop_due(now=now) == 0  # 90 s or more is left: not yet
    later = now + timedelta(seconds=left - 25)  # 25 s left: within its 20 s grace and the 10 s period
    assert windows.stop_due(now=later) == 1
    assert windows.stop_due(now=later) == 0  # asked once
    row = Attempt.objects.get(pk=attempt.pk)
    assert (row.state, row.stop_reason, row.stop_grace, row.stop_requeue, row.stop_failure) == (
        "running", "window_closed", 20, True, False)  # fmt: skip
    assert Attempt.objects.get(pk=elsewhere.pk).stop_reason == ""
    asked = JobEvent.objects.get(job_id=attempt.job_id, reason="stop_requested").message
    assert "window_closed" in asked and "closes in 25 s" in asked
    # The node stops it (SIGTERM: exit 143) and reports: the stop decides; no retry spent, credited.
    with transaction.atomic():
        assert attempts.end_attempt(attempt.pk, attempt.job_id, outcome="failed", reason="window_closed",
                                    exit_code=143, now=later + timedelta(seconds=5))  # fmt: skip
    row.refresh_from_db()
    job = Job.objects.get(pk=attempt.job_id)
    assert (row.state, row.reason) == ("preempted", "window_closed")
    assert (job.state, job.retries_used, job.current_attempt_id) == ("queued", 0, None)
    assert "availability window" in job.pending_reason
    assert JobEvent.objects.filter(job=job, reason="window_closed", message__contains="retry budget untouched").exists()
    entry = LedgerEntry.objects.get(attempt_ref=attempt.pk)
    assert (entry.outcome, entry.reason, entry.credited) == ("preempted", "window_closed", True)


@pytest.mark.django_db
def test_after_the_close_nothing_is_placed_until_a_window_opens_again(api, mine, monkeypatch):
    now = timezone.now().replace(second=0, microsecond=0)
    # Every day from two hours ago to one hour ago: closed now, open again tomorrow.
    _set(mine, windows=[{"days": ["daily"], "start": (now - timedelta(hours=2)).strftime("%H:%M"),
                         "end": (now - timedelta(hours=1)).strftime("%H:%M")}])  # fmt: skip
    job = _job(api, checkpoint=CKPT)
    assert _placed(job) == "no node fits: 1 are outside their lenders' availability windows"
    assert windows.stop_due(now=now) == 0
    tomorrow = now + timedelta(hours=22, minutes=30)
    monkeypatch.setattr(timezone, "now", lambda: tomorrow)
    assert _placed(job) == "mine"
