"""The scheduling policy's pieces one by one: named filters, scores, turns, and that none of them needs Django."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from jobs.scheduling import filters, scores
from jobs.scheduling.fairshare import ProjectShare, Turns
from jobs.scheduling.snapshots import JobSnapshot, NodeSnapshot, ProjectLimit

GIB = 1024**3
ROOT = Path(__file__).resolve().parents[2]
PURE = (
    "snapshots",
    "filters",
    "scores",
    "capacity",
    "fairshare",
    "reservations",
    "reasons",
    "pacing",
    "policy",
    "isolation",
    "terms",
)


def node(**over) -> NodeSnapshot:
    return NodeSnapshot(**{"id": 1, "cpu_milli": 4000, "memory_bytes": 8 * GIB, **over})


def job(**over) -> JobSnapshot:
    return JobSnapshot(**{"id": 1, "project_id": 1, "cpu_milli": 1000, "memory_bytes": GIB, **over})


REJECTED_BY = {
    filters.approval: (node(approved=False), job()),
    filters.online: (node(online=False), job()),
    filters.draining: (node(draining=True), job()),
    filters.pool: (node(trust="untrusted"), job()),
    filters.min_trust: (node(trust="community", public_pool=True), job(min_trust="platform")),
    filters.secrets: (node(trust="community", public_pool=True), job(needs_secrets=True)),
    filters.region: (node(region="a"), job(region="b")),
    filters.labels: (node(labels=frozenset({("disk", "hdd")})), job(node_selector=frozenset({("disk", "ssd")}))),
    filters.egress: (node(runs_networked=False), job()),
    filters.image: (node(image_patterns=("ghcr.io",)), job(image="alpine:3.20")),
    filters.isolation: (node(), job(isolation="sandbox")),
    filters.terms_project: (node(terms_projects=frozenset({2})), job()),
    filters.terms_closed: (node(terms_open=False), job()),
    filters.terms_window: (node(terms_left=599.0), job(timeout_seconds=600)),
    filters.terms_hours: (node(terms_max_seconds=3600.0), job(timeout_seconds=3601)),
    filters.reliability: (node(reliability=79.9), job(min_reliability=80.0)),
}


@pytest.mark.parametrize("check", filters.STATIC, ids=lambda f: f.__name__)
def test_each_static_filter_names_its_own_reason_when_it_rejects_and_passes_a_plain_node(check):
    rejected, asking = REJECTED_BY[check]
    assert check(rejected, asking) == check.__name__
    assert check(node(), job()) is None


def test_the_static_filters_run_in_the_order_their_reasons_are_printed():
    assert [check.__name__ for check in filters.STATIC] == list(filters.STATIC_PHRASES)
    assert filters.REASON_ORDER[: len(filters.STATIC)] == tuple(filters.STATIC_PHRASES)


def test_a_node_is_rejected_for_the_first_filter_only():
    assert filters.static_reject(node(online=False, region="a"), job(region="b")) == "online"
    assert filters.static_reject(node(region="a", runs_networked=False), job(region="b")) == "region"
    assert filters.static_reject(node(), job()) is None


def test_pool_own_takes_only_the_projects_nodes_and_pool_any_the_shared_pool_too():
    mine = node(trust="untrusted", owner_project_id=1)
    assert filters.pool(mine, job(pool="own")) is None
    assert filters.pool(node(), job(pool="own")) == "pool"  # a platform node, not the project's
    assert filters.pool(node(), job()) is None
    assert filters.pool(node(trust="community", public_pool=False, owner_project_id=2), job()) == "pool"


def test_capacity_reasons_name_gpus_first_then_cpu_memory_and_disk():
    big = job(gpu_count=1, cpu_milli=8000, memory_bytes=16 * GIB, disk_bytes=GIB)
    assert filters.capacity_reject(0, 0, 0, 0, big) == "gpus"
    assert filters.capacity_reject(0, 0, 1, 0, big) == "cpu"
    assert filters.capacity_reject(8000, 0, 1, 0, big) == "memory"
    assert filters.capacity_reject(8000, 16 * GIB, 1, 0, big) == "disk"
    assert filters.capacity_reject(8000, 16 * GIB, 1, GIB, big) is None
    assert filters.capacity_phrases(job(gpu_count=1))["gpus"] == "lack 1 free GPU"


def test_the_spread_score_counts_a_gpu_like_eight_cores():
    assert scores.spread(8000, 0, 0) == scores.spread(0, 0, 1) == 8.0
    assert scores.spread(1000, GIB, 0) == 2.0


def test_a_reservation_ranks_the_node_that_lacks_least_then_the_emptiest_then_the_lowest_id():
    j = job(cpu_milli=4000, memory_bytes=4 * GIB)
    lacks_a_core = scores.reservation_rank(j, 3000, 8 * GIB, 0, node_id=1)
    fits_now = scores.reservation_rank(j, 4000, 4 * GIB, 0, node_id=2)
    emptier = scores.reservation_rank(j, 8000, 4 * GIB, 0, node_id=3)
    same_but_later = scores.reservation_rank(j, 8000, 4 * GIB, 0, node_id=4)
    assert sorted([lacks_a_core, same_but_later, fits_now, emptier]) == [
        emptier,
        same_but_later,
        fits_now,
        lacks_a_core,
    ]


def test_turns_go_to_the_lowest_share_and_a_project_keeps_its_turn_while_it_stays_lowest():
    capacity = (10_000.0, 10.0 * GIB, 0.0)
    shares = {1: ProjectShare(ProjectLimit(held=(2000.0, 0.0, 0.0)), capacity), 2: ProjectShare(None, capacity)}
    queues = {1: [job(id=1, queued_at=1.0)], 2: [job(id=2, project_id=2, queued_at=9.0), job(id=3, project_id=2)]}
    turns = Turns(queues, shares)
    assert turns.next() == 2  # holds nothing yet
    assert turns.next(2, 0.1, queues[2][1]) == 2  # 10% < 20%: still the lowest
    assert turns.next(2, 0.3, queues[2][1]) == 1
    assert turns.next(1, 0.3, None) == 2  # project 1 has no next job: done
    assert turns.next() is None


def test_a_project_above_its_entitlement_says_so():
    share = ProjectShare(ProjectLimit(held=(5000.0, 0.0, 0.0)), (10_000.0, GIB, 0.0))
    assert share.above(0.4) and not share.above(0.5)


def test_the_policy_modules_import_no_django_and_no_orm():
    modules = ", ".join(f"jobs.scheduling.{name}" for name in PURE)
    code = f"import sys, {modules}; print(sorted(m for m in sys.modules if m.split('.')[0] in ('django', 'rest_framework')))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
