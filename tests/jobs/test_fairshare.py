"""The pure policy's ordering: weighted fair share (DRF) across projects, priority within a project, reservations
against starvation, and the pending reasons these give."""

from __future__ import annotations

import math
import random

from jobs.scheduling import fairshare, policy
from jobs.scheduling.snapshots import JobSnapshot, NodeSnapshot, ProjectLimit

GIB = 1024**3


def node(id, **over) -> NodeSnapshot:
    base = dict(id=id, name=f"n{id}", cpu_milli=4000, memory_bytes=64 * GIB, trust="platform")
    base.update(over)
    return NodeSnapshot(**base)


def job(id, project_id, **over) -> JobSnapshot:
    base = dict(id=id, project_id=project_id, cpu_milli=1000, memory_bytes=GIB, queued_at=float(id))
    base.update(over)
    return JobSnapshot(**base)


def order_of_projects(plan, jobs) -> list[int]:
    by_id = {j.id: j for j in jobs}
    return [by_id[p.job_id].project_id for p in plan.placements]


def counts(plan, jobs) -> dict[int, int]:
    out: dict[int, int] = {}
    for pid in order_of_projects(plan, jobs):
        out[pid] = out.get(pid, 0) + 1
    return out


def test_two_projects_with_equal_weights_alternate_on_contended_capacity():
    a = [job(i, 1) for i in range(1, 9)]  # A queued all of its backlog first
    b = [job(i, 2) for i in range(9, 13)]
    plan = policy.place([*a, *b], [node(1), node(2)], now=100)
    assert order_of_projects(plan, [*a, *b]) == [1, 2, 1, 2, 1, 2, 1, 2]


def test_a_backlog_does_not_keep_a_later_project_from_the_first_freed_capacity():
    # A holds the node's 4 cores with its running jobs; one core frees up: B's job gets it, not A's 12 older jobs.
    a = [job(i, 1) for i in range(1, 13)]
    b = [job(20, 2)]
    limits = {1: ProjectLimit(active=3, held=(3000.0, 3 * GIB, 0.0))}
    plan = policy.place([*a, *b], [node(1, used_cpu_milli=3000, used_memory_bytes=3 * GIB)], now=100, projects=limits)
    assert [p.job_id for p in plan.placements] == [20]
    assert plan.pending[1] == "waiting for its fair share (project holds 75% of eligible capacity, weight 1)"


def test_weights_two_to_one_give_two_to_one_holdings():
    a = [job(i, 1) for i in range(1, 20)]
    b = [job(i, 2) for i in range(20, 40)]
    limits = {1: ProjectLimit(weight=2.0), 2: ProjectLimit(weight=1.0)}
    plan = policy.place([*a, *b], [node(1), node(2), node(3)], now=100, projects=limits)
    assert counts(plan, [*a, *b]) == {1: 8, 2: 4}
    assert plan.shares[1] == plan.shares[2]


def test_one_project_alone_uses_all_idle_capacity():
    jobs = [job(i, 1) for i in range(1, 20)]
    plan = policy.place(jobs, [node(1), node(2)], now=100, projects={1: ProjectLimit(weight=0.5)})
    assert len(plan.placements) == 8
    assert plan.pending[9] == "no node fits: 2 lack 1000 free millicores"  # capacity, not fair share: nobody else waits


def test_dominant_resource_shares_weigh_gpu_jobs_against_cpu_jobs():
    # 16 cores and 4 GPUs. A GPU job (1 GPU, 1 core) is a quarter of the GPUs; a CPU job (1 core) a sixteenth
    # of the cores. DRF evens the dominant shares: about four CPU jobs for each GPU job.
    gpus = tuple(f"g{k}" for k in range(4))
    n = node(1, cpu_milli=16000, gpu_uuids=gpus)
    g = [job(i, 1, gpu_count=1) for i in range(1, 9)]
    c = [job(i, 2) for i in range(9, 40)]
    plan = policy.place([*g, *c], [n], now=100)
    got = counts(plan, [*g, *c])
    assert got[1] + got[2] == 16  # every core used
    assert got[2] >= 3 * got[1]  # FIFO would have given the GPU project its 8 jobs' worth first
    gpu_share, cpu_share = got[1] / 4, got[2] / 16
    assert abs(gpu_share - cpu_share) <= 1 / 4  # within one job's dominant size


def test_priority_orders_a_projects_own_queue_and_fifo_breaks_ties():
    jobs = [job(1, 1), job(2, 1, priority=5), job(3, 1, priority=-3), job(4, 1, priority=5), job(5, 1)]
    plan = policy.place(jobs, [node(1, cpu_milli=3000)], now=100)
    assert [p.job_id for p in plan.placements] == [2, 4, 1]
    assert set(plan.pending) == {3, 5}


def test_priority_does_not_jump_ahead_of_another_projects_fair_share():
    jobs = [job(1, 1), job(2, 1), job(3, 2, priority=100), job(4, 2, priority=100)]
    plan = policy.place(jobs, [node(1, cpu_milli=2000)], now=100)
    assert sorted(p.job_id for p in plan.placements) == [1, 3]


def simulate(reserve_after, *, ticks=80):
    """One 8-GPU node; project 2 keeps all GPUs busy with a stream of 1-GPU jobs lasting 4 ticks; project 1
    queues one 8-GPU job at tick 0. Returns the tick at which the big job started (None: never) and the
    small jobs placed on the node while it was reserved."""
    gpus = tuple(f"g{k}" for k in range(8))
    running: list[tuple[JobSnapshot, tuple[str, ...], int]] = []  # job, GPUs, ends at
    queued = [job(1, 1, gpu_count=8, cpu_milli=8000, queued_at=0.0)]
    next_id, while_reserved = 100, []
    for k in range(8):  # the stream is already running, staggered
        running.append((job(next_id, 2, gpu_count=1, queued_at=-1.0), (gpus[k],), 1 + k % 4))
        next_id += 1
    for t in range(ticks):
        running = [r for r in running if r[2] > t]
        for _ in range(2):
            queued.append(job(next_id, 2, gpu_count=1, queued_at=float(t)))
            next_id += 1
        used = [g for r in running for g in r[1]]
        held = {1: [0.0, 0.0, 0.0], 2: [0.0, 0.0, 0.0]}
        for r in running:
            h = held[r[0].project_id]
            h[0] += r[0].cpu_milli
            h[1] += r[0].memory_bytes
            h[2] += len(r[1])
        n = node(
            1,
            cpu_milli=64000,
            gpu_uuids=gpus,
            used_gpus=frozenset(used),
            used_cpu_milli=sum(r[0].cpu_milli for r in running),
            used_memory_bytes=sum(r[0].memory_bytes for r in running),
        )
        limits = {pid: ProjectLimit(held=tuple(h)) for pid, h in held.items()}
        plan = policy.place(queued, [n], now=float(t), projects=limits, reserve_after=reserve_after)
        by_id = {j.id: j for j in queued}
        for p in plan.placements:
            if p.job_id == 1:
                return t, while_reserved
            if 1 in plan.reservations:
                while_reserved.append(p.job_id)
            running.append((by_id[p.job_id], p.gpu_uuids, t + 4))
        placed = {p.job_id for p in plan.placements}
        queued = [j for j in queued if j.id not in placed]
    return None, while_reserved


def test_a_reservation_holds_a_node_against_a_stream_of_small_jobs():
    started, while_reserved = simulate(reserve_after=10)
    assert started is not None and started <= 10 + 4 + 1  # reserved after 10 ticks; the last small job ends by 4
    assert while_reserved == []
    never, _ = simulate(reserve_after=None)
    assert never is None  # without reservations the small jobs take every freed GPU first


def test_a_reserved_node_tells_later_jobs_why_and_still_takes_what_does_not_delay():
    gpus = tuple(f"g{k}" for k in range(4))
    busy = node(1, cpu_milli=16000, gpu_uuids=gpus, used_gpus=frozenset(gpus[:2]), used_cpu_milli=2000)
    big = job(1, 1, gpu_count=4, cpu_milli=4000, queued_at=0.0)
    small_gpu = job(2, 2, gpu_count=1, queued_at=500.0)
    small_cpu = job(3, 2, cpu_milli=1000, queued_at=500.0)
    plan = policy.place([big, small_gpu, small_cpu], [busy], now=1000.0, reserve_after=300)
    assert plan.reservations == {1: 1}
    assert plan.pending[1] == "reserved node n1: waiting for its running jobs to end"
    assert plan.pending[2] == "node n1 reserved for an older job"
    assert [p.job_id for p in plan.placements] == [3]  # 14 free cores less 1 still leave the 4 the big job needs


def test_a_project_over_its_fair_share_does_not_reserve():
    limits = {1: ProjectLimit(held=(4000.0, 4 * GIB, 0.0)), 2: ProjectLimit()}
    full = node(1, used_cpu_milli=4000, used_memory_bytes=4 * GIB)
    jobs = [job(1, 1, queued_at=0.0), job(2, 2, queued_at=900.0)]  # A waited 1,000 s, past reserve_after; B 100 s
    plan = policy.place(jobs, [full], now=1000.0, projects=limits, reserve_after=300)
    assert plan.reservations == {}  # A, holding all of its share, does not reserve even though it waited long
    plan = policy.place(
        [job(1, 1, queued_at=0.0), job(2, 2, queued_at=0.0)], [full], now=1000.0, projects=limits, reserve_after=300
    )
    assert plan.reservations == {2: 1}  # B, below its share, reserves; A, holding all of it, waits for its share


def test_decayed_usage_counts_when_a_half_life_is_set():
    recent = fairshare.decayed_average([(0.0, 3600.0 * 1000)], now=3600.0, half_life=3600.0)
    assert math.isclose(recent, 1000 * 0.5 * math.log(2))
    assert fairshare.decayed_average([(0.0, 1e9)], now=0.0, half_life=0) == 0.0
    # Equal holdings now: the project that used more recently waits.
    limits = {1: ProjectLimit(recent=(2000.0, 0.0, 0.0)), 2: ProjectLimit(recent=(0.0, 0.0, 0.0))}
    plan = policy.place([job(1, 1), job(2, 2)], [node(1, cpu_milli=1000)], now=100, projects=limits)
    assert [p.job_id for p in plan.placements] == [2]


def test_own_nodes_count_in_the_capacity_a_project_may_use():
    shared, own = fairshare.pool_capacity(
        [node(1), node(2, trust="untrusted", owner_project_id=7), node(3, online=False)]
    )
    assert fairshare.capacity_for(7, shared, own) == (8000.0, 128.0 * GIB, 0.0)
    assert fairshare.capacity_for(8, shared, own) == (4000.0, 64.0 * GIB, 0.0)


def test_the_fair_share_plan_is_deterministic_and_independent_of_input_order():
    rng = random.Random(3)
    nodes = [
        node(
            i,
            cpu_milli=rng.choice([2000, 4000]),
            gpu_uuids=tuple(f"g{i}-{k}" for k in range(rng.choice([0, 2, 4]))),
            used_cpu_milli=rng.choice([0, 1000]),
        )
        for i in range(1, 25)
    ]
    jobs = [
        job(
            i,
            rng.randint(1, 5),
            cpu_milli=rng.choice([500, 1000, 2000]),
            gpu_count=rng.choice([0, 0, 1, 4]),
            priority=rng.choice([0, 0, 10, -5]),
            queued_at=float(rng.randint(0, 900)),
        )
        for i in range(1, 200)
    ]
    limits = {
        pid: ProjectLimit(active=1, max_concurrent=rng.choice([None, 30]), weight=rng.choice([1, 2, 0.5]))
        for pid in range(1, 6)
    }
    first = policy.place(jobs, nodes, now=1000.0, projects=limits, reserve_after=300)
    assert first.placements and first.reservations
    for _ in range(4):
        rng.shuffle(jobs)
        rng.shuffle(nodes)
        again = policy.place(jobs, nodes, now=1000.0, projects=dict(reversed(limits.items())), reserve_after=300)
        assert again == first


def test_a_job_blocked_by_several_reservations_names_them():
    full = dict(cpu_milli=4000, used_cpu_milli=3000)
    nodes = [node(1, **full), node(2, **full)]
    big = [job(1, 1, cpu_milli=2000, queued_at=0.0), job(2, 2, cpu_milli=2000, queued_at=0.0)]
    older = job(3, 3, cpu_milli=500, queued_at=-10.0)  # older than both, but its project holds the running jobs
    limits = {3: ProjectLimit(held=(6000.0, 0.0, 0.0))}
    plan = policy.place([*big, older], nodes, now=400.0, projects=limits, reserve_after=300)
    assert plan.reservations == {1: 1, 2: 2}
    assert plan.pending[3] == "2 nodes reserved for jobs that have waited over 300 s (n1, n2)"
    plan = policy.place([*big, job(4, 3, cpu_milli=500, queued_at=350.0)], nodes, now=400.0, reserve_after=300)
    assert plan.pending[4] == "2 nodes reserved for older jobs (n1, n2)"


def test_with_a_half_life_memory_counts_whole_as_held_now_and_cpu_half_and_half():
    assert fairshare.blended((1000.0, 4 * GIB, 2.0), (3000.0, 0.0, 0.0)) == (2000.0, 4 * GIB, 1.0)
