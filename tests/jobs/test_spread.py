"""A spread group's jobs (a service's replicas) go to other lenders' nodes first, then other nodes, where the pool
allows; otherwise anywhere (jobs/scheduling/spread.py, the one hint in the policy)."""

from __future__ import annotations

from jobs.scheduling import policy, spread
from jobs.scheduling.snapshots import JobSnapshot, NodeSnapshot

GIB = 1024**3


def node(id, **over) -> NodeSnapshot:
    base = dict(id=id, name=f"n{id}", cpu_milli=4000, memory_bytes=8 * GIB, trust="platform")
    base.update(over)
    return NodeSnapshot(**base)


def community(id, lender, **over) -> NodeSnapshot:
    return node(id, trust="community", public_pool=True, owner_project_id=lender, **over)


def job(id, **over) -> JobSnapshot:
    base = dict(id=id, project_id=1, cpu_milli=1000, memory_bytes=GIB, queued_at=float(id), spread_group="service:7")
    base.update(over)
    return JobSnapshot(**base)


def placed(plan) -> dict[int, int]:
    return {p.job_id: p.node_id for p in plan.placements}


def test_a_replica_goes_to_another_lender_even_when_its_siblings_lender_has_the_emptiest_node():
    nodes = [community(1, lender=50, cpu_milli=64000), community(2, lender=50, cpu_milli=64000), community(3, 60)]
    plan = policy.place([job(1)], nodes, now=0, groups={"service:7": {1}})
    assert placed(plan) == {1: 3}
    plain = policy.place([job(1, spread_group="")], nodes, now=0, groups={"service:7": {1}})
    assert placed(plain) == {1: 1}  # without a group, the spread score alone: the emptiest node


def test_then_another_node_of_the_same_lender():
    nodes = [node(1, cpu_milli=64000), node(2)]  # platform nodes: one lender
    assert placed(policy.place([job(1)], nodes, now=0, groups={"service:7": {1}})) == {1: 2}


def test_replicas_placed_in_one_pass_spread_too():
    nodes = [community(1, 50, cpu_milli=64000), community(2, 60), community(3, 70)]
    plan = policy.place([job(1), job(2), job(3)], nodes, now=0)
    assert sorted(placed(plan).values()) == [1, 2, 3]


def test_where_the_pool_does_not_allow_it_the_replica_still_runs():
    nodes = [node(1, cpu_milli=64000), node(2, cpu_milli=500)]  # node 2 is too small
    assert placed(policy.place([job(1)], nodes, now=0, groups={"service:7": {1}})) == {1: 1}


def test_a_failed_avoiding_try_leaves_no_shortcut_behind_for_the_next_jobs():
    # The group's job finds no room away from node 1; a plain job of the same shape must still find node 1.
    nodes = [node(1, cpu_milli=64000), node(2, cpu_milli=500)]
    plan = policy.place([job(1), job(2, spread_group="")], nodes, now=0, groups={"service:7": {1}})
    assert placed(plan) == {1: 1, 2: 1}


def test_tiers():
    nodes = [community(1, 50), community(2, 50), community(3, 60), node(4)]
    assert spread.avoid_tiers({1}, nodes) == [[0, 1], [0]]
    assert spread.avoid_tiers({4}, nodes) == [[3]]
    assert spread.avoid_tiers(set(), nodes) == []
