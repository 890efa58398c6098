"""Zero drift: over 10,000 attempts of every ending on 50 nodes of 10 lenders, the totals per lender and per
project are exactly the sums of the attempts' own figures, and recording again changes nothing. (One test: the
10,000 entries take most of a minute to record on a loaded machine.)"""

from __future__ import annotations

import random
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import call_command

from lending import ledger, selectors
from lending.models import LedgerEntry

from .conftest import GIB

ATTEMPTS, NODES, LENDERS, PROJECTS = 10_000, 50, 10, 7
# (outcome, reason): succeeded, failed, lost, requeued (a lost first attempt, retried), preempted, reclaimed
ENDINGS = [
    ("succeeded", "exited"),
    ("failed", "exited"),
    ("failed", "timeout"),
    ("lost", "lost"),
    ("lost", "gpu_error"),
    ("cancelled", "cancelled"),
    ("cancelled", "preempted"),
    ("cancelled", "reclaimed"),
]


@pytest.fixture
def ten_thousand_attempts(make_user, lent_node):
    from jobs.models import Attempt, Job
    from quotas.models import Project

    rnd = random.Random(37)
    lenders = [make_user(f"lender{i}") for i in range(LENDERS)]
    nodes = [lent_node(lenders[i % LENDERS], gpus=2) for i in range(NODES)]
    projects = [Project.objects.create(name=f"p{i}", slug=f"p{i}") for i in range(PROJECTS)]
    base = datetime(2026, 11, 28, tzinfo=UTC)
    jobs = Job.objects.bulk_create(
        Job(project=projects[i % PROJECTS], name="j", image="i", command=["x"], cpu_milli=1, memory_bytes=1,
            timeout_seconds=60, queued_at=base, state="succeeded")
        for i in range(ATTEMPTS // 2)
    )  # fmt: skip
    rows = []
    for i in range(ATTEMPTS):
        job = jobs[i // 2]  # two attempts per job: a requeued first one, then its retry
        node = nodes[rnd.randrange(NODES)]
        outcome, reason = ("lost", "lost") if i % 2 == 0 and rnd.random() < 0.3 else rnd.choice(ENDINGS)
        start = base + timedelta(seconds=rnd.randrange(0, 10 * 86_400), microseconds=rnd.randrange(1_000_000))
        started = None if rnd.random() < 0.05 else start
        rows.append(
            Attempt(job=job, number=1 + i % 2, node=node, node_name=node.name, cpu_milli=rnd.choice([250, 1000, 3500]),
                    memory_bytes=rnd.randrange(1, 8 * GIB), disk_bytes=rnd.choice([0, GIB, 3 * GIB + 7]),
                    gpu_uuids=[g["uuid"] for g in node.gpus[: rnd.randrange(3)]], state=outcome, reason=reason,
                    started_at=started, ended_at=start + timedelta(seconds=rnd.randrange(0, 20_000),
                                                                   microseconds=rnd.randrange(1_000_000)))
        )  # fmt: skip
    return Attempt.objects.bulk_create(rows)


def _expected(attempts, key) -> tuple[Counter, Counter]:
    """Per group: the sum of each attempt's own figures (all, and credited only)."""
    total, credited = Counter(), Counter()
    for a in attempts:
        f = ledger.figures(started_at=a.started_at, ended_at=a.ended_at, cpu_milli=a.cpu_milli,
                           memory_bytes=a.memory_bytes, disk_bytes=a.disk_bytes, gpus=len(a.gpu_uuids))  # fmt: skip
        for name in selectors.FIGURES:
            total[(key(a), name)] += getattr(f, name)
            if a.state != "lost":
                credited[(key(a), name)] += getattr(f, name)
    return total, credited


def _got(rows, group) -> tuple[Counter, Counter]:
    total, credited = Counter(), Counter()
    for row in rows:
        for name in selectors.FIGURES:
            total[(row[f"{group}_id"], name)] += row[name]
            credited[(row[f"{group}_id"], name)] += row[f"credited_{name}"]
    return +total, +credited


@pytest.mark.django_db
def test_totals_per_lender_and_project_are_the_exact_sums_of_the_attempts(ten_thousand_attempts):
    from nodes.models import EnrollmentToken

    attempts = ten_thousand_attempts
    call_command("ledger", "--backfill", stdout=open("/dev/null", "w"), stderr=open("/dev/null", "w"))
    assert LedgerEntry.objects.count() == ATTEMPTS
    lender_of = dict(EnrollmentToken.objects.values_list("node_id", "created_by_id"))
    checks = [("lender", lambda a: lender_of[a.node_id]), ("project", lambda a: a.job.project_id)]
    before = {}
    for group, key in checks:
        for period in ("month", "day"):
            rows = selectors.totals(LedgerEntry.objects.all(), group_by=group, period=period)
            assert _got(rows, group) == tuple(+c for c in _expected(attempts, key)), (group, period)
            before[(group, period)] = rows
    lost = sum(r["lost"] for r in before[("lender", "month")])
    assert lost == sum(a.state == "lost" for a in attempts)

    assert ledger.backfill() == 0  # recording again adds nothing, and the totals do not move
    for group, period in before:
        assert selectors.totals(LedgerEntry.objects.all(), group_by=group, period=period) == before[(group, period)]

    nov = selectors.totals(LedgerEntry.objects.all(), group_by="node", month="2026-11")
    dec = selectors.totals(LedgerEntry.objects.all(), group_by="node", month="2026-12")
    ended = Counter(a.ended_at.strftime("%Y-%m") for a in attempts)
    assert sum(r["attempts"] for r in nov) == ended["2026-11"] and ended["2026-11"] > 0
    assert sum(r["attempts"] for r in dec) == ended["2026-12"] and ended["2026-12"] > 0
    assert {r["period"] for r in nov} == {"2026-11"}
