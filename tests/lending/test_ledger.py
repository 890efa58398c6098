"""The lenders' ledger: one entry per ended attempt, written in its ending's transaction, totals without drift."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import transaction

from lending import ledger
from lending.models import LedgerEntry

from .conftest import GIB


def test_figures_are_integer_resource_milliseconds():
    start = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    f = ledger.figures(
        started_at=start,
        ended_at=start + timedelta(seconds=10, microseconds=500_000),
        cpu_milli=1500,
        memory_bytes=2 * GIB,
        disk_bytes=GIB // 2,
        gpus=2,
    )
    assert f == ledger.Figures(run_ms=10_500, cpu_ms=15_750, gpu_ms=21_000, memory_gib_ms=21_000, disk_gib_ms=5_250)


def test_an_attempt_that_never_started_held_nothing():
    now = datetime(2026, 3, 1, tzinfo=UTC)
    kw = dict(cpu_milli=1000, memory_bytes=GIB, disk_bytes=0, gpus=1)
    assert ledger.figures(started_at=None, ended_at=now, **kw) == ledger.Figures(0, 0, 0, 0, 0)
    assert ledger.figures(started_at=now, ended_at=now, **kw) == ledger.Figures(0, 0, 0, 0, 0)


def test_credit_goes_to_work_that_ended_normally_or_that_euler_stopped():
    assert ledger.credited("succeeded") and ledger.credited("failed") and ledger.credited("cancelled")
    assert not ledger.credited("lost")
    assert not ledger.credited("reclaimed") and ledger.credited(
        "preempted"
    )  # the lender took it back; Euler stopped it


@pytest.mark.django_db
def test_it_records_a_reported_end_with_its_lender_node_and_project(project, make_user, lent_node, running_attempt):
    from jobs import attempts

    alice = make_user("alice")
    node = lent_node(alice, gpus=1)
    attempt = running_attempt(project, node, seconds=100, cpu_milli=2000, gpus=1)
    with transaction.atomic():
        now = attempt.started_at + timedelta(seconds=100)
        assert attempts.end_attempt(
            attempt.pk, attempt.job_id, outcome="succeeded", reason="exited", exit_code=0, now=now
        )
    entry = LedgerEntry.objects.get(attempt_ref=attempt.pk)
    assert (entry.lender_id, entry.lender_name, entry.node_id, entry.project_id) == (
        alice.pk,
        "alice",
        node.pk,
        project.pk,
    )
    assert (entry.outcome, entry.reason, entry.credited) == ("succeeded", "exited", True)
    assert (entry.run_ms, entry.cpu_ms, entry.gpu_ms, entry.memory_gib_ms) == (100_000, 200_000, 100_000, 100_000)
    assert entry.disk_gib_ms == 200_000 and entry.day == now.astimezone(UTC).date()


@pytest.mark.django_db
def test_work_lost_with_its_node_is_recorded_without_credit_and_a_duplicate_end_adds_nothing(
    project, make_user, lent_node, running_attempt
):
    from jobs import attempts

    node = lent_node(make_user("bob"))
    attempt = running_attempt(project, node)
    assert attempts.node_lost(node_id=node.pk) == 1
    assert attempts.node_lost(node_id=node.pk) == 0
    with transaction.atomic():
        assert ledger.record(attempt_id=attempt.pk) is None  # already there: nothing added
    entry = LedgerEntry.objects.get()
    assert (entry.outcome, entry.credited) == ("lost", False)


@pytest.mark.django_db
def test_a_gpu_fault_is_marked_and_not_credited(project, make_user, lent_node, running_attempt):
    from jobs import attempts

    node = lent_node(make_user("carl"), gpus=1)
    attempt = running_attempt(project, node, gpus=1)
    with transaction.atomic():
        attempts.end_attempt(attempt.pk, attempt.job_id, outcome="lost", reason="gpu_error", now=attempt.started_at)
    entry = LedgerEntry.objects.get()
    assert entry.gpu_fault and not entry.credited


@pytest.mark.django_db
def test_an_ending_that_rolls_back_leaves_no_entry(project, make_user, lent_node, running_attempt):
    from jobs import attempts

    attempt = running_attempt(project, lent_node(make_user("dora")))
    with pytest.raises(RuntimeError), transaction.atomic():
        attempts.end_attempt(attempt.pk, attempt.job_id, outcome="succeeded", reason="exited", now=attempt.started_at)
        raise RuntimeError("the ending fails after the entry was written")
    assert not LedgerEntry.objects.exists()
