"""The pure scheduling policy: every filter, the pending reasons, scoring, GPUs, determinism."""

from __future__ import annotations

import random

from jobs.scheduling import policy
from jobs.scheduling.snapshots import JobSnapshot, NodeSnapshot, Placement, ProjectLimit

GIB = 1024**3


def node(id, **over) -> NodeSnapshot:
    base = dict(id=id, name=f"n{id}", cpu_milli=4000, memory_bytes=8 * GIB, trust="platform")
    base.update(over)
    return NodeSnapshot(**base)


def job(id, **over) -> JobSnapshot:
    base = dict(id=id, project_id=1, cpu_milli=1000, memory_bytes=GIB, queued_at=float(id))
    base.update(over)
    return JobSnapshot(**base)


def placed(plan) -> dict[int, int]:
    return {p.job_id: p.node_id for p in plan.placements}


def only_node_for(j: JobSnapshot, *nodes: NodeSnapshot):
    return policy.place([j], list(nodes), now=0)


def test_it_places_a_job_on_a_node_that_fits():
    plan = policy.place([job(1)], [node(10)], now=0)
    assert plan.placements == (Placement(job_id=1, node_id=10, gpu_uuids=()),)
    assert plan.pending == {}


def test_it_skips_nodes_that_are_not_approved_offline_or_draining():
    plan = only_node_for(job(1), node(1, approved=False), node(2, online=False), node(3, draining=True), node(4))
    assert placed(plan) == {1: 4}
    plan = only_node_for(job(1), node(1, approved=False), node(2, online=False), node(3, draining=True))
    assert plan.pending[1] == "no node fits: 1 are not approved, 1 are offline, 1 are draining"


def test_pool_any_takes_platform_public_community_and_own_nodes_only():
    nodes = [
        node(1, trust="community", public_pool=False, owner_project_id=2),
        node(2, trust="untrusted", owner_project_id=2),
        node(3, trust="community", public_pool=True, owner_project_id=2),
    ]
    assert placed(policy.place([job(1)], nodes, now=0)) == {1: 3}
    own_untrusted = node(4, trust="untrusted", owner_project_id=1)
    assert placed(policy.place([job(1)], [nodes[0], nodes[1], own_untrusted], now=0)) == {1: 4}
    plan = policy.place([job(1)], nodes[:2], now=0)
    assert plan.pending[1] == "no node fits: 2 are outside the job's pool"


def test_pool_own_takes_only_the_projects_nodes():
    plan = policy.place([job(1, pool="own")], [node(1), node(2, trust="untrusted", owner_project_id=1)], now=0)
    assert placed(plan) == {1: 2}
    plan = policy.place([job(1, pool="own")], [node(1)], now=0)
    assert "1 are outside the job's pool" in plan.pending[1]


def test_min_trust_platform_refuses_community_and_own_nodes():
    nodes = [node(1, trust="community", public_pool=True), node(2, trust="untrusted", owner_project_id=1)]
    plan = policy.place([job(1, min_trust="platform")], nodes, now=0)
    assert plan.pending[1] == "no node fits: 2 are below min_trust platform"
    assert placed(policy.place([job(1, min_trust="platform")], [*nodes, node(3)], now=0)) == {1: 3}


def test_a_job_with_env_goes_to_platform_nodes_only():
    community = node(1, trust="community", public_pool=True, cpu_milli=64000)
    plan = policy.place([job(1, needs_secrets=True)], [community], now=0)
    assert plan.pending[1] == "no node fits: 1 are not platform nodes (the job has env)"
    assert placed(policy.place([job(1, needs_secrets=True)], [community, node(2)], now=0)) == {1: 2}


def test_region_and_node_selector_filter_nodes():
    nodes = [
        node(1, region="cn-sh"),
        node(2, region="cn-bj", labels=frozenset({("disk", "ssd")})),
        node(3, region="cn-bj"),
    ]
    j = job(1, region="cn-bj", node_selector=frozenset({("disk", "ssd")}))
    assert placed(policy.place([j], nodes, now=0)) == {1: 2}
    plan = policy.place([j], [nodes[0], nodes[2]], now=0)
    assert plan.pending[1] == "no node fits: 1 are in another region, 1 lack the node_selector labels"


def test_cpu_memory_and_gpu_capacity_filter_nodes_and_count_in_the_reason():
    nodes = [node(1, cpu_milli=500), node(2, memory_bytes=GIB // 2)]
    plan = policy.place([job(1)], nodes, now=0)
    assert plan.pending[1] == "no node fits: 1 lack 1000 free millicores, 1 lack 1073741824 free memory bytes"
    assert placed(policy.place([job(2)], [*nodes, node(3)], now=0)) == {2: 3}
    gpu_nodes = [node(1, cpu_milli=500), node(3, gpu_uuids=("g-a",)), node(4, gpu_uuids=("g-b", "g-c"))]
    plan = policy.place([job(1, gpu_count=2, cpu_milli=8000)], gpu_nodes, now=0)
    assert plan.pending[1] == "no node fits: 2 lack 2 free GPUs, 1 lack 8000 free millicores"


def test_used_capacity_counts_against_the_node():
    busy = node(1, used_cpu_milli=3500)
    assert placed(policy.place([job(1)], [busy], now=0)) == {}
    assert placed(policy.place([job(1, cpu_milli=500)], [busy], now=0)) == {1: 1}


def test_it_never_overbooks_a_node_within_a_pass():
    plan = policy.place([job(i) for i in range(1, 7)], [node(1)], now=0)
    assert len(plan.placements) == 4  # 4 cores
    assert set(plan.pending) == {5, 6}
    assert "1 lack 1000 free millicores" in plan.pending[5]


def test_gpus_are_assigned_by_uuid_and_never_shared():
    n = node(1, gpu_uuids=("g0", "g1", "g2", "g3"), cpu_milli=64000, memory_bytes=64 * GIB)
    plan = policy.place([job(1, gpu_count=2), job(2, gpu_count=1), job(3, gpu_count=2)], [n], now=0)
    got = {p.job_id: p.gpu_uuids for p in plan.placements}
    assert got == {1: ("g0", "g1"), 2: ("g2",)}
    assert 3 in plan.pending
    held = [u for uuids in got.values() for u in uuids]
    assert len(held) == len(set(held))


def test_gpus_held_by_running_attempts_are_not_handed_out_again():
    n = node(1, gpu_uuids=("g0", "g1"), used_gpus=frozenset({"g0"}))
    plan = policy.place([job(1, gpu_count=1)], [n], now=0)
    assert plan.placements[0].gpu_uuids == ("g1",)


def test_score_spreads_jobs_over_the_emptiest_nodes():
    nodes = [node(1), node(2, used_cpu_milli=2000), node(3, cpu_milli=8000)]
    plan = policy.place([job(1), job(2), job(3)], nodes, now=0)
    assert [p.node_id for p in plan.placements] == [3, 3, 1]


def test_cpu_only_jobs_keep_off_gpu_nodes_while_others_fit():
    big_gpu = node(1, gpu_uuids=("g0",), cpu_milli=64000, memory_bytes=256 * GIB)
    small = node(2, cpu_milli=2000, memory_bytes=4 * GIB)
    plan = policy.place([job(1), job(2), job(3)], [big_gpu, small], now=0)
    assert [p.node_id for p in plan.placements] == [2, 2, 1]  # the GPU node only once the small one is full


def test_gpu_jobs_only_go_to_nodes_with_free_gpus():
    plan = policy.place([job(1, gpu_count=1)], [node(1, cpu_milli=64000), node(2, gpu_uuids=("g",))], now=0)
    assert plan.placements == (Placement(job_id=1, node_id=2, gpu_uuids=("g",)),)


def test_the_project_concurrency_quota_holds_jobs_with_a_pending_reason():
    limits = {1: ProjectLimit(active=1, max_concurrent=2)}
    plan = policy.place([job(1), job(2), job(3, project_id=2)], [node(1)], now=0, projects=limits)
    assert placed(plan) == {1: 1, 3: 1}
    assert plan.pending[2] == "concurrency_quota: the project runs 2 of 2 concurrent jobs"


def test_jobs_in_retry_backoff_wait_until_not_before():
    plan = policy.place([job(1, not_before=100.0)], [node(1)], now=50.0)
    assert plan.pending == {1: policy.REASON_BACKOFF}
    assert placed(policy.place([job(1, not_before=100.0)], [node(1)], now=100.0)) == {1: 1}


def test_older_jobs_are_placed_first():
    plan = policy.place([job(2, queued_at=5.0), job(1, queued_at=9.0)], [node(1, cpu_milli=1000)], now=0)
    assert placed(plan) == {2: 1}


def test_without_nodes_the_reason_says_so():
    assert policy.place([job(1)], [], now=0).pending[1] == "no node fits: there are no nodes"


def test_the_plan_does_not_depend_on_input_order():
    rng = random.Random(7)
    nodes = [
        node(
            i,
            cpu_milli=rng.choice([2000, 4000, 8000]),
            memory_bytes=rng.choice([4, 8, 16]) * GIB,
            gpu_uuids=tuple(f"g{i}-{k}" for k in range(rng.choice([0, 0, 2]))),
            region=rng.choice(["a", "b", "c"]),
            labels=frozenset({("host", f"h{i}"), ("disk", rng.choice(["ssd", "hdd"]))}),
            owner_project_id=rng.choice([None, 1, 9]),
            trust=rng.choice(["platform", "community", "untrusted"]),
            public_pool=rng.choice([True, False]),
        )
        for i in range(1, 40)
    ]
    jobs = [
        job(
            i,
            cpu_milli=rng.choice([500, 1000, 3000]),
            gpu_count=rng.choice([0, 0, 1]),
            region=rng.choice(["", "a"]),
            node_selector=rng.choice([frozenset(), frozenset({("disk", "ssd")})]),
            queued_at=float(rng.randint(0, 5)),
        )
        for i in range(1, 150)
    ]
    first = policy.place(jobs, nodes, now=0)
    for _ in range(5):
        rng.shuffle(jobs)
        rng.shuffle(nodes)
        again = policy.place(jobs, nodes, now=0)
        assert again.placements == first.placements
        assert again.pending == first.pending


def test_a_large_random_pass_never_overbooks_anything():
    rng = random.Random(11)
    nodes = [
        node(i, cpu_milli=4000, memory_bytes=8 * GIB, gpu_uuids=tuple(f"g{i}-{k}" for k in range(rng.choice([0, 4]))))
        for i in range(1, 60)
    ]
    jobs = [
        job(
            i,
            cpu_milli=rng.choice([250, 1000, 2500]),
            memory_bytes=rng.choice([1, 3]) * GIB,
            gpu_count=rng.choice([0, 1, 3]),
        )
        for i in range(1, 600)
    ]
    plan = policy.place(jobs, nodes, now=0)
    by_id = {j.id: j for j in jobs}
    cpu, mem, gpus = {}, {}, []
    for p in plan.placements:
        cpu[p.node_id] = cpu.get(p.node_id, 0) + by_id[p.job_id].cpu_milli
        mem[p.node_id] = mem.get(p.node_id, 0) + by_id[p.job_id].memory_bytes
        assert len(p.gpu_uuids) == by_id[p.job_id].gpu_count
        gpus.extend(p.gpu_uuids)
    assert all(v <= 4000 for v in cpu.values())
    assert all(v <= 8 * GIB for v in mem.values())
    assert len(gpus) == len(set(gpus))
    assert len(plan.placements) + len(plan.pending) == len(jobs)


def test_nodes_differing_only_in_labels_no_job_names_are_filtered_alike():
    nodes = [node(i, labels=frozenset({("host", f"h{i}")}), cpu_milli=1000) for i in range(1, 4)]
    plan = policy.place([job(1), job(2), job(3), job(4)], nodes, now=0)
    assert sorted(placed(plan).values()) == [1, 2, 3]
    assert plan.pending[4] == "no node fits: 3 lack 1000 free millicores"
    picky = policy.place([job(1, node_selector=frozenset({("host", "h2")}))], nodes, now=0)
    assert placed(picky) == {1: 2}


def test_disk_counts_like_memory_and_the_pending_reason_names_it():
    nodes = [node(1, disk_bytes=5 * GIB), node(2, disk_bytes=20 * GIB, used_disk_bytes=15 * GIB)]
    plan = policy.place([job(1, disk_bytes=10 * GIB)], nodes, now=0)
    assert plan.placements == ()
    assert plan.pending[1] == f"no node fits: 2 lack {10 * GIB} free disk bytes"


def test_placements_use_up_a_nodes_disk():
    plan = policy.place([job(i, disk_bytes=10 * GIB) for i in (1, 2, 3)], [node(1, disk_bytes=25 * GIB)], now=0)
    assert placed(plan) == {1: 1, 2: 1}
    assert plan.pending[3] == f"no node fits: 1 lack {10 * GIB} free disk bytes"


def test_a_node_that_does_not_report_disk_is_not_limited_by_it():
    assert placed(policy.place([job(1, disk_bytes=10 * GIB)], [node(1)], now=0)) == {1: 1}


EGRESS_REASON = 'refuse networked jobs (egress rules not installed; network "none" jobs fit)'


def test_a_networked_job_skips_a_node_whose_egress_rules_are_not_installed():
    broken, fine = node(1, runs_networked=False, cpu_milli=64000), node(2)  # the broken one scores higher
    assert placed(policy.place([job(1)], [broken, fine], now=0)) == {1: 2}
    plan = policy.place([job(1)], [broken], now=0)
    assert plan.placements == ()
    assert plan.pending[1] == f"no node fits: 1 {EGRESS_REASON}"


def test_a_job_without_network_still_fits_a_node_whose_egress_rules_are_not_installed():
    broken = node(1, runs_networked=False)
    plan = policy.place([job(1, networked=False), job(2)], [broken], now=0)
    assert placed(plan) == {1: 1}
    assert plan.pending[2] == f"no node fits: 1 {EGRESS_REASON}"


def test_the_egress_reason_comes_after_the_other_static_filters_and_before_capacity():
    nodes = [
        node(1, region="cn-bj", runs_networked=False),
        node(2, region="cn-sh", runs_networked=False),  # counted once, for its first filter: the region
        node(3, region="cn-bj", cpu_milli=500),
    ]
    plan = policy.place([job(1, region="cn-bj")], nodes, now=0)
    assert plan.pending[1] == f"no node fits: 1 are in another region, 1 {EGRESS_REASON}, 1 lack 1000 free millicores"


def test_a_reservation_never_lands_on_a_node_that_refuses_the_job():
    plan = policy.place(
        [job(1, cpu_milli=4000)],
        [node(1, runs_networked=False), node(2, used_cpu_milli=1000)],
        now=1000,
        reserve_after=10,
    )
    assert plan.reservations == {1: 2}
