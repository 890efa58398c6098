"""Scheduler benchmark: pure-policy placements/s at 100, 1,000 and 10,000 nodes with 10,000 queued jobs,
and a full pass (snapshot load, policy, PostgreSQL commit, broadcasts, wake-ups).

    .venv/bin/python bench/scheduler.py                       # pure policy only
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


def bench_db(n_nodes: int, n_jobs: int) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "euler.settings")
    import django
    from django.conf import settings

    django.setup()
    from django.db import connection

    if connection.vendor != "postgresql":
        print("full pass: skipped (set DATABASE_URL to PostgreSQL)")
        return
    connection.settings_dict["TEST"]["NAME"] = "euler_bench_scheduler"
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
    parser.add_argument("--db-nodes", type=int, default=1000)
    parser.add_argument("--db-jobs", type=int, default=10_000)
    args = parser.parse_args()
    bench_pure(args.repeat)
    if args.db:
        bench_db(args.db_nodes, args.db_jobs)


if __name__ == "__main__":
    main()
