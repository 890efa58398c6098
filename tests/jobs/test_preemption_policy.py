"""Priority classes in the pure policy: classes place strictly in order, a higher class that fits nowhere preempts
lower ones (victims.py chooses), a claimed node is held for its preemptor, the guards hold."""

from __future__ import annotations

from jobs.scheduling import policy
from jobs.scheduling.snapshots import JobSnapshot, NodeSnapshot, ProjectLimit
from jobs.scheduling.victims import Guards, Running

GIB = 1024**3
NOW = 100_000.0
GUARDS = Guards(min_run_seconds=60, max_per_hour=3)


def node(id, **over) -> NodeSnapshot:
    base = dict(id=id, name=f"n{id}", cpu_milli=4000, memory_bytes=8 * GIB, trust="platform")
    base.update(over)
    return NodeSnapshot(**base)


def job(id, **over) -> JobSnapshot:
    base = dict(id=id, project_id=1, cpu_milli=1000, memory_bytes=GIB, queued_at=float(id))
    base.update(over)
    return JobSnapshot(**base)


def running(aid, node_id, *, cpu=1000, value=0, age=600.0, **kw) -> Running:
    return Running(
        attempt_id=aid, job_id=1000 + aid, project_id=kw.pop("project_id", 9), node_id=node_id, priority_value=value,
        cpu_milli=cpu, memory_bytes=GIB, started_at=NOW - age, **kw,
    )  # fmt: skip


def full(n: NodeSnapshot, rs: list[Running]) -> NodeSnapshot:
    """The node with what these attempts hold in use."""
    from dataclasses import replace

    return replace(
        n,
        used_cpu_milli=sum(r.cpu_milli for r in rs),
        used_memory_bytes=sum(r.memory_bytes for r in rs),
        used_gpus=frozenset(u for r in rs for u in r.gpu_uuids),
    )


def placed(plan) -> dict[int, int]:
    return {p.job_id: p.node_id for p in plan.placements}


def test_a_higher_class_places_first_whatever_its_age_and_project():
    jobs = [job(1, project_id=1, cpu_milli=4000), job(2, project_id=2, cpu_milli=4000, priority_value=10)]
    plan = policy.place(jobs, [node(1)], now=NOW)
    assert placed(plan) == {2: 1}
    assert plan.pending[1].startswith("no node fits")


def test_a_lower_class_takes_what_the_higher_leaves():
    jobs = [job(1, cpu_milli=3000, priority_value=10), job(2, project_id=2, cpu_milli=1000), job(3, cpu_milli=2000)]
    assert placed(policy.place(jobs, [node(1)], now=NOW)) == {1: 1, 2: 1}


def test_within_a_class_fair_share_holds():
    # Project 1 holds half the node already; its next job waits while project 2, below its share, places.
    jobs = [job(1, project_id=1, priority_value=5), job(2, project_id=2, priority_value=5, queued_at=50.0)]
    limits = {1: ProjectLimit(held=(2000.0, 0.0, 0.0)), 2: ProjectLimit()}
    plan = policy.place(jobs, [node(1, cpu_milli=3000, used_cpu_milli=2000)], now=NOW, projects=limits)
    assert placed(plan) == {2: 1}


def test_a_higher_class_that_fits_nowhere_preempts_the_youngest_lowest_class_job():
    rs = [running(1, 1, value=0, age=900), running(2, 1, value=0, age=300), running(3, 1, value=5, age=200),
          running(4, 1, value=0, age=1200)]  # fmt: skip
    plan = policy.place([job(7, priority_value=10)], [full(node(1), rs)], now=NOW, running=rs, guards=GUARDS)
    assert plan.placements == ()
    [decision] = plan.preemptions
    assert (decision.job_id, decision.node_id, [r.attempt_id for r in decision.victims]) == (7, 1, [2])
    assert plan.pending[7] == "waiting for preemption: 1 lower-class job stopping on node n1"


def test_it_takes_the_node_where_the_fewest_jobs_stop():
    on1 = [running(1, 1, cpu=2000), running(2, 1, cpu=2000)]
    on2 = [running(3, 2, cpu=1000), running(4, 2, cpu=3000)]
    rs = on1 + on2
    plan = policy.place(
        [job(7, cpu_milli=3000, priority_value=1)], [full(node(1), on1), full(node(2), on2)],
        now=NOW, running=rs, guards=GUARDS,
    )  # fmt: skip
    [decision] = plan.preemptions
    assert decision.node_id == 2 and [r.attempt_id for r in decision.victims] == [4]


def test_no_preemption_within_a_class_or_under_the_guards():
    rs = [running(1, 1, cpu=4000, value=10)]
    plan = policy.place([job(7, priority_value=10)], [full(node(1), rs)], now=NOW, running=rs, guards=GUARDS)
    assert plan.preemptions == ()
    young = [running(1, 1, cpu=4000, age=30)]
    plan = policy.place([job(7, priority_value=10)], [full(node(1), young)], now=NOW, running=young, guards=GUARDS)
    assert plan.preemptions == ()
    capped = [running(1, 1, cpu=4000, preempted_last_hour=3)]
    plan = policy.place([job(7, priority_value=10)], [full(node(1), capped)], now=NOW, running=capped, guards=GUARDS)
    assert plan.preemptions == ()
    assert plan.pending[7].startswith("no node fits")


def test_a_job_too_big_for_any_node_preempts_nothing():
    rs = [running(1, 1, cpu=4000)]
    plan = policy.place(
        [job(7, cpu_milli=8000, priority_value=10)], [full(node(1), rs)], now=NOW, running=rs, guards=GUARDS
    )
    assert plan.preemptions == ()


def test_two_preemptors_take_different_victims_and_nodes():
    on1, on2 = [running(1, 1, cpu=4000)], [running(2, 2, cpu=4000)]
    jobs = [job(7, cpu_milli=4000, priority_value=10), job(8, cpu_milli=4000, priority_value=10)]
    plan = policy.place(jobs, [full(node(1), on1), full(node(2), on2)], now=NOW, running=on1 + on2, guards=GUARDS)
    got = sorted((d.job_id, d.node_id, d.victims[0].attempt_id) for d in plan.preemptions)
    assert got == [(7, 1, 1), (8, 2, 2)]


def test_a_claimed_node_is_held_for_its_preemptor_while_its_victims_stop():
    # The victim (attempt 1) is still stopping: the node is full; a low-class job cannot take what frees up there,
    # and the preemptor says why it waits, and does not preempt again.
    stopping = [running(1, 1, cpu=3000, stopping=True), running(2, 2, cpu=4000)]
    n1 = full(node(1), stopping[:1])
    n2 = full(node(2), stopping[1:])
    jobs = [job(7, cpu_milli=3000, priority_value=10), job(8, cpu_milli=1000, project_id=2)]
    plan = policy.place(jobs, [n1, n2], now=NOW, claims={7: (1, 1)}, running=stopping, guards=GUARDS)
    assert plan.placements == () and plan.preemptions == ()
    assert plan.pending[7] == "waiting for preemption: 1 lower-class job stopping on node n1"
    assert 7 not in plan.reservations  # a claim is the caller's record, not a reservation of this pass
    # Once it stopped: the preemptor takes the node; the small job fits beside it.
    plan = policy.place(jobs, [node(1), n2], now=NOW, claims={7: (1, 0)}, running=stopping[1:], guards=GUARDS)
    assert placed(plan) == {7: 1, 8: 1}


def test_a_claimed_node_of_a_job_in_another_batch_is_held_too():
    # The pass's later batches see the claim as `held` (node id -> the preemptor): what it needs stays free.
    preemptor = job(7, cpu_milli=3000, priority_value=10)
    plan = policy.place([job(8, cpu_milli=2000)], [node(1)], now=NOW, held={1: preemptor})
    assert plan.placements == ()


def test_the_same_inputs_in_any_order_give_the_same_preemptions():
    import random

    nodes_ = []
    rs = []
    aid = 0
    for n in range(1, 6):
        mine = []
        for k in range(3):
            aid += 1
            mine.append(running(aid, n, cpu=1000 + 500 * (k % 2), value=k % 2, age=100 + 37 * aid))
        rs += mine
        nodes_.append(full(node(n), mine))
    jobs = [job(100 + i, cpu_milli=2500, priority_value=5, project_id=1 + i % 2) for i in range(4)]
    first = policy.place(jobs, nodes_, now=NOW, running=rs, guards=GUARDS)
    for seed in range(5):
        r = random.Random(seed)
        a, b, c = list(jobs), list(nodes_), list(rs)
        r.shuffle(a), r.shuffle(b), r.shuffle(c)
        again = policy.place(a, b, now=NOW, running=c, guards=GUARDS)
        assert again.preemptions == first.preemptions
        assert again.pending == first.pending
    assert len(first.preemptions) == 4


def test_a_claim_on_a_node_gone_offline_holds_nothing_and_the_job_may_preempt_elsewhere():
    on2 = [running(2, 2, cpu=4000)]
    nodes = [node(1, online=False), full(node(2), on2)]
    plan = policy.place(
        [job(7, cpu_milli=3000, priority_value=10)], nodes, now=NOW, claims={7: (1, 0)}, running=on2, guards=GUARDS
    )
    assert plan.placements == ()
    [decision] = plan.preemptions
    assert decision.node_id == 2
