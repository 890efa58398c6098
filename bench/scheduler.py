"""Scheduler benchmark: pure-policy placements/s at 100, 1,000 and 10,000 nodes with 10,000 queued jobs,
and a full pass (snapshot load, policy, PostgreSQL commit, broadcasts, wake-ups).

    .venv/bin/python bench/scheduler.py                       # pure policy only
    .venv/bin/python bench/scheduler.py --fair                # plus the fair-share runs (see bench_fair)
    DATABASE_URL=postgres://root@127.0.0.1:5432/test REDIS_URL=redis://127.0.0.1:6379/0 \
        .venv/bin/python bench/scheduler.py --db              # plus the full pass (own scratch database)

Nodes are sized so that every job fits (per-placement cost is then comparable across node counts);
a quarter of the nodes carry GPUs, a fifth of the jobs ask for one or two, jobs spread over three
regions and some use a node_selector.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

GIB = 1024**3
REGIONS = ("cn-sh", "cn-bj", "cn-gz")


def shapes(n_nodes: int, n_jobs: int, seed: int = 1):
    rng = random.Random(seed)
    per_node = math.ceil(n_jobs / n_nodes * 1.3)
    gpu_every = 4
    gpus_per_gpu_node = max(2, math.ceil(n_jobs * 0.2 * 1.5 / max(1, n_nodes // gpu_every) * 1.3))
    nodes = []
    for i in range(1, n_nodes + 1):
        has_gpu = i % gpu_every == 0
        nodes.append(
            dict(
                id=i,
                name=f"n{i}",
                region=REGIONS[i % 3],
                labels=frozenset({("disk", "ssd")} if i % 2 else set()),
                cpu_milli=per_node * 1000,
                memory_bytes=per_node * 2 * GIB,
                gpu_uuids=tuple(f"GPU-{i}-{k}" for k in range(min(64, gpus_per_gpu_node) if has_gpu else 0)),
            )
        )
    jobs = []
    for j in range(1, n_jobs + 1):
        gpu = rng.choice((1, 2)) if rng.random() < 0.2 else 0
        jobs.append(
            dict(
                id=j,
                project_id=rng.randint(1, 20),
                cpu_milli=rng.choice((250, 500, 1000)),
                memory_bytes=rng.choice((1, 2)) * GIB // 2,
                gpu_count=gpu,
                queued_at=float(j),
                region=rng.choice(("",) * 3 + REGIONS),
                node_selector=frozenset({("disk", "ssd")}) if rng.random() < 0.1 else frozenset(),
            )
        )
    return nodes, jobs


def bench_pure(repeat: int) -> dict[int, float]:
    from jobs.scheduling import policy
    from jobs.scheduling.snapshots import JobSnapshot, NodeSnapshot

    results = {}
    for n_nodes in (100, 1_000, 10_000):
        raw_nodes, raw_jobs = shapes(n_nodes, 10_000)
        nodes = [NodeSnapshot(**n) for n in raw_nodes]
        jobs = [JobSnapshot(**j) for j in raw_jobs]
        times, cpu_times, placed = [], [], 0
        for _ in range(repeat):
            t0, c0 = time.perf_counter(), time.process_time()
            plan = policy.place(jobs, nodes, now=time.time())
            times.append(time.perf_counter() - t0)
            cpu_times.append(time.process_time() - c0)
            placed = len(plan.placements)
        best, med, cpu = min(times), statistics.median(times), statistics.median(cpu_times)
        results[n_nodes] = (med / max(placed, 1), cpu / max(placed, 1))
        print(
            f"pure policy  nodes={n_nodes:>6} jobs=10000 placed={placed:>5} pending={10000 - placed:>4} "
            f"wall median={med * 1000:6.1f} ms best={best * 1000:6.1f} ms cpu median={cpu * 1000:6.1f} ms  "
            f"{placed / med:7.0f} placements/s (wall median)  {results[n_nodes][1] * 1e6:5.1f} us CPU/placement"
        )
    print(
        "per-placement cost at 10,000 nodes / at 100 nodes: "
        f"{results[10_000][1] / results[100][1]:.2f}x (CPU time), {results[10_000][0] / results[100][0]:.2f}x (wall)"
    )
    return results


def _contended(n_nodes: int, n_jobs: int, seed: int = 2, sizes: tuple[int, ...] = (250, 500, 1000)):
    """CPU-only jobs (memory in proportion) of 20 projects with weights 1, 2, 3, on nodes holding about 40% of
    the demand: every project keeps a backlog, so each one's weighted fair share is well defined."""
    rng = random.Random(seed)
    jobs = []
    for j in range(1, n_jobs + 1):
        cpu = rng.choice(sizes)
        jobs.append(dict(id=j, project_id=rng.randint(1, 20), cpu_milli=cpu, memory_bytes=cpu * GIB // 1000))
    demand = sum(j["cpu_milli"] for j in jobs)
    cores = max(1, round(demand * 0.4 / n_nodes / 1000))
    nodes = [dict(id=i, name=f"n{i}", cpu_milli=cores * 1000, memory_bytes=cores * GIB) for i in range(1, n_nodes + 1)]
    weights = {pid: float(1 + pid % 3) for pid in range(1, 21)}
    return nodes, jobs, weights


def fairness_error(running: dict[int, dict], weights: dict[int, float], waiting: set[int]) -> float:
    """Max over projects with a backlog of |held - weighted fair part| in units of the project's largest job.

    The fair part: what the projects with a backlog hold together, split by their weights (a project whose
    queue ran dry holds what it holds; CPU is every project's dominant resource here)."""
    held: dict[int, float] = {}
    biggest: dict[int, float] = {}
    for job in running.values():
        held[job["project_id"]] = held.get(job["project_id"], 0) + job["cpu_milli"]
        biggest[job["project_id"]] = max(biggest.get(job["project_id"], 0), job["cpu_milli"])
    total = sum(held.get(pid, 0) for pid in waiting)
    wsum = sum(weights[pid] for pid in waiting)
    worst = 0.0
    for pid in waiting:
        fair = total * weights[pid] / wsum
        worst = max(worst, abs(held.get(pid, 0) - fair) / max(biggest.get(pid, 1000), 1))
    return worst


def bench_fair(repeat: int) -> None:
    """Fair share: placements/s of the contended run's first pass; then rounds where a tenth of the running jobs
    end and a pass refills, the fairness error after each; then a reserved 8-GPU job under a stream of 1-GPU jobs."""
    from jobs.scheduling import policy
    from jobs.scheduling.snapshots import JobSnapshot, NodeSnapshot, ProjectLimit

    runs = [(1_000, 10_000, (500,)), (1_000, 10_000, (250, 500, 1000)), (10_000, 60_000, (500,))]
    for n_nodes, n_jobs, sizes in runs:
        raw_nodes, raw_jobs, weights = _contended(n_nodes, n_jobs, sizes=sizes)
        rng = random.Random(5)
        now = 1_000.0
        queued = {j["id"]: JobSnapshot(**j, queued_at=now - rng.random() * 200) for j in raw_jobs}
        running: dict[int, dict] = {}
        where: dict[int, int] = {}
        errors, rates = [], []
        for round_ in range(11):
            used: dict[int, list[int]] = {}
            held: dict[int, list[float]] = {}
            for job_id, job in running.items():
                u = used.setdefault(where[job_id], [0, 0])
                u[0] += job["cpu_milli"]
                u[1] += job["memory_bytes"]
                h = held.setdefault(job["project_id"], [0.0, 0.0, 0.0])
                h[0] += job["cpu_milli"]
                h[1] += job["memory_bytes"]
            nodes = [
                NodeSnapshot(
                    **n, used_cpu_milli=used.get(n["id"], (0, 0))[0], used_memory_bytes=used.get(n["id"], (0, 0))[1]
                )
                for n in raw_nodes
            ]
            limits = {
                pid: ProjectLimit(weight=w, held=tuple(held.get(pid, (0.0, 0.0, 0.0)))) for pid, w in weights.items()
            }
            jobs = list(queued.values())
            times = []
            for _ in range(repeat if round_ == 0 else 1):
                t0, c0 = time.perf_counter(), time.process_time()
                plan = policy.place(jobs, nodes, now=now, projects=limits, reserve_after=300)
                times.append((time.perf_counter() - t0, time.process_time() - c0))
            rates.append(
                (len(plan.placements), statistics.median(t[0] for t in times), statistics.median(t[1] for t in times))
            )
            by_id = {j["id"]: j for j in raw_jobs}
            for p in plan.placements:
                running[p.job_id] = by_id[p.job_id]
                where[p.job_id] = p.node_id
                del queued[p.job_id]
            errors.append(fairness_error(running, weights, {j.project_id for j in queued.values()}))
            ending = rng.sample(sorted(running), len(running) // 10)  # a tenth of the running jobs end
            for job_id in ending:
                del running[job_id]
                del where[job_id]
            now += 10.0
        placed, took, cpu = rates[0]
        print(
            f"fair share   nodes={n_nodes:>6} jobs={len(raw_jobs)} sizes={'/'.join(map(str, sizes))}m projects=20 "
            f"(weights 1-3), capacity ~40% of demand: first pass placed={placed} wall {took * 1000:.0f} ms "
            f"cpu {cpu * 1000:.0f} ms = {placed / took:.0f} placements/s wall, {placed / cpu:.0f} per CPU-second; "
            f"refill passes median {statistics.median(r[0] / r[2] for r in rates[1:] if r[0]):.0f} per CPU-second"
        )
        print(
            "             fairness error after each contended pass (|held - weighted fair part| in the project's "
            f"largest jobs, worst project): {', '.join(f'{e:.2f}' for e in errors)}"
        )
    for reserve_after in (300.0, None):
        started, passes, wall = _reservation_run(reserve_after)
        label = "never (within the 2 h simulated)" if started is None else f"after {started:.0f} s (simulated)"
        print(
            f"reservation  reserve_after={reserve_after}: a queued 8-GPU job on 100 full 8-GPU nodes under a stream of "
            f"1-GPU jobs from 19 projects starts {label}; {passes} passes, median {wall * 1000:.1f} ms each"
        )


def _reservation_run(reserve_after, *, n_nodes: int = 100, tick: float = 5.0, horizon: float = 7200.0):
    """Simulated time: a pass every `tick` s; 1-GPU jobs last 60-600 s; each of 19 projects keeps 40 queued."""
    from jobs.scheduling import policy
    from jobs.scheduling.snapshots import JobSnapshot, NodeSnapshot, ProjectLimit

    rng = random.Random(9)
    gpus = {i: tuple(f"GPU-{i}-{k}" for k in range(8)) for i in range(1, n_nodes + 1)}
    running: dict[int, tuple] = {}  # job id -> (job, node id, gpu uuids, ends at)
    next_id = 1
    for i in range(1, n_nodes + 1):  # the pool starts full of small jobs
        for k in range(8):
            job = JobSnapshot(id=next_id, project_id=1 + next_id % 19, cpu_milli=1000, memory_bytes=GIB, gpu_count=1)
            running[next_id] = (job, i, (gpus[i][k],), rng.uniform(0, 600))
            next_id += 1
    big = JobSnapshot(id=0, project_id=20, cpu_milli=8000, memory_bytes=8 * GIB, gpu_count=8, queued_at=0.0)
    queued = {0: big}
    walls, t = [], 0.0
    while t < horizon:
        running = {k: v for k, v in running.items() if v[3] > t}
        backlog: dict[int, int] = {}
        for job in queued.values():
            backlog[job.project_id] = backlog.get(job.project_id, 0) + 1
        for pid in range(1, 20):
            for _ in range(40 - backlog.get(pid, 0)):
                queued[next_id] = JobSnapshot(
                    id=next_id, project_id=pid, cpu_milli=1000, memory_bytes=GIB, gpu_count=1, queued_at=t
                )
                next_id += 1
        used: dict[int, list] = {}
        held: dict[int, list[float]] = {}
        for job, node_id, uuids, _ in running.values():
            u = used.setdefault(node_id, [0, 0, []])
            u[0] += job.cpu_milli
            u[1] += job.memory_bytes
            u[2].extend(uuids)
            h = held.setdefault(job.project_id, [0.0, 0.0, 0.0])
            h[0] += job.cpu_milli
            h[1] += job.memory_bytes
            h[2] += job.gpu_count
        nodes = [
            NodeSnapshot(
                id=i,
                name=f"g{i}",
                cpu_milli=64000,
                memory_bytes=512 * GIB,
                gpu_uuids=gpus[i],
                used_cpu_milli=used.get(i, (0, 0, []))[0],
                used_memory_bytes=used.get(i, (0, 0, []))[1],
                used_gpus=frozenset(used.get(i, (0, 0, []))[2]),
            )
            for i in range(1, n_nodes + 1)
        ]
        limits = {pid: ProjectLimit(held=tuple(h)) for pid, h in held.items()}
        t0 = time.perf_counter()
        plan = policy.place(list(queued.values()), nodes, now=t, projects=limits, reserve_after=reserve_after)
        walls.append(time.perf_counter() - t0)
        for p in plan.placements:
            if p.job_id == 0:
                return t, len(walls), statistics.median(walls)
            job = queued.pop(p.job_id)
            running[p.job_id] = (job, p.node_id, p.gpu_uuids, t + rng.uniform(60, 600))
        t += tick
    return None, len(walls), statistics.median(walls)


def bench_db(n_nodes: int, n_jobs: int) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("EULER_SCHEDULER_HANDOVER_WINDOW", "0")  # the pass's own cost: no web tier to pace for
    import django
    from django.conf import settings

    django.setup()
    from django.db import connection

    if connection.vendor != "postgresql":
        print("full pass: skipped (set DATABASE_URL to PostgreSQL)")
        return
    connection.settings_dict["TEST"]["NAME"] = f"euler_bench_scheduler_{os.getpid()}"  # runs side by side
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False)
    try:
        from django.utils import timezone

        from jobs.models import Job
        from jobs.scheduling import cycle
        from nodes.models import Node
        from quotas.models import Quota
        from quotas.services import project_create

        raw_nodes, raw_jobs = shapes(n_nodes, n_jobs)
        projects = {}
        for pid in sorted({j["project_id"] for j in raw_jobs}):
            projects[pid] = project_create(name=f"bench-{pid}")
        Quota.objects.update(max_concurrent_jobs=100_000)
        now = timezone.now()
        Node.objects.bulk_create(
            [
                Node(
                    name=n["name"],
                    region=n["region"],
                    labels=dict(n["labels"]),
                    trust="platform",
                    approval="approved",
                    online=True,
                    last_heartbeat_at=now,
                    cpu_milli=n["cpu_milli"],
                    memory_bytes=n["memory_bytes"],
                    gpus=[{"uuid": u, "index": k, "memory_bytes": GIB} for k, u in enumerate(n["gpu_uuids"])],
                )
                for n in raw_nodes
            ],
            batch_size=1000,
        )
        Job.objects.bulk_create(
            [
                Job(
                    project=projects[j["project_id"]],
                    name=f"j{j['id']}",
                    image="euler-test/busybox",
                    command=["true"],
                    cpu_milli=j["cpu_milli"],
                    memory_bytes=j["memory_bytes"],
                    gpu_count=j["gpu_count"],
                    timeout_seconds=60,
                    region=j["region"],
                    node_selector=dict(j["node_selector"]),
                    queued_at=now,
                )
                for j in raw_jobs
            ],
            batch_size=1000,
        )
        profile = os.environ.get("BENCH_PROFILE")
        if profile:
            import cProfile

            prof = cProfile.Profile()
            prof.enable()
        t0, c0 = time.perf_counter(), time.process_time()
        stats = cycle.one_pass()
        took, cpu = time.perf_counter() - t0, time.process_time() - c0
        if profile:
            import pstats

            prof.disable()
            pstats.Stats(prof).sort_stats("cumtime").print_stats(40)
        print(
            f"full pass    nodes={n_nodes:>6} jobs={n_jobs} placed={stats.placed} batches={stats.batches} "
            f"(batch {settings.EULER_SCHEDULER_BATCH}) wall {took * 1000:.0f} ms (this process's CPU {cpu * 1000:.0f} ms)  "
            f"{stats.placed / took:.0f} placements/s (PostgreSQL commit, JobEvents, broadcasts and wake-ups included)"
        )
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--db", action="store_true", help="also time a full pass against DATABASE_URL")
    parser.add_argument("--fair", action="store_true", help="also run the fair-share and reservation runs")
    parser.add_argument("--db-nodes", type=int, default=1000)
    parser.add_argument("--db-jobs", type=int, default=10_000)
    args = parser.parse_args()
    bench_pure(args.repeat)
    if args.fair:
        bench_fair(args.repeat)
    if args.db:
        bench_db(args.db_nodes, args.db_jobs)


if __name__ == "__main__":
    main()
