"""Job arrays: submit time of a 10,000-task array (one request) against 10,000 single submits, and scheduling
placements per second of the array's tasks against 10,000 single jobs, on simulated nodes (rows in the database,
as bench/scheduler.py --db makes them; no agent). Also the cost of a pass with thousands of tasks held back by
`parallelism` (they are `waiting`, never read by the scheduler) against an empty queue.

    DATABASE_URL=postgres://root@127.0.0.1:5432/test REDIS_URL=redis://127.0.0.1:6379/0 \
        .venv/bin/python bench/arrays.py [--count 10000] [--nodes 1000] [--singles 10000]

Runs in its own scratch database (created and dropped).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

GIB = 1024**3
SPEC = {"name": "bench", "image": "euler-test/busybox", "command": ["true"], "cpu_milli": 250,
        "memory_bytes": 256 << 20, "disk_bytes": 256 << 20, "gpu_count": 0, "timeout_seconds": 600}  # fmt: skip


def _nodes(n: int, per_node: int) -> None:
    from django.utils import timezone

    from nodes.models import Node

    now = timezone.now()
    Node.objects.bulk_create(
        [Node(name=f"sim-{i}", trust="platform", approval="approved", online=True, last_heartbeat_at=now,
              cpu_milli=per_node * 250, memory_bytes=per_node * (256 << 20), disk_bytes=per_node * GIB)
         for i in range(n)],
        batch_size=1000,
    )  # fmt: skip


def _clear_jobs() -> None:
    from jobs.models import Attempt, Job, JobArray

    Attempt.objects.all().delete()
    Job.objects.all().delete()
    JobArray.objects.all().delete()


def _bulk_singles(project, n: int) -> None:
    from django.utils import timezone

    from jobs.models import Job

    now = timezone.now()
    Job.objects.bulk_create([Job(project=project, queued_at=now, **SPEC) for _ in range(n)], batch_size=2000)


def _pass_all() -> tuple[int, float, int]:
    """Passes until nothing more is placed: (placed, seconds, passes)."""
    from jobs.scheduling import cycle

    placed, passes, t0 = 0, 0, time.perf_counter()
    while True:
        got = cycle.one_pass().placed
        passes += 1
        placed += got
        if not got:
            return placed, time.perf_counter() - t0, passes


def _end_assigned() -> int:
    """The simulated nodes report every assigned attempt ended with exit 0, one report (transaction) each, through
    the same path as a real report (jobs.attempts.end_attempt): it frees the task's slot and releases the next."""
    from django.db import transaction
    from django.utils import timezone

    from jobs import attempts
    from jobs.models import Attempt

    rows = list(Attempt.objects.filter(state="assigned").values_list("pk", "job_id"))
    now = timezone.now()
    for attempt_id, job_id in rows:
        with transaction.atomic():
            attempts.end_attempt(attempt_id, job_id, outcome="succeeded", reason="exited", exit_code=0, now=now)
    return len(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--singles", type=int, default=10_000, help="single jobs to compare with")
    parser.add_argument("--parallelism", type=int, default=100)
    parser.add_argument("--sample", type=int, default=300, help="single submits timed (then extrapolated)")
    args = parser.parse_args()

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("EULER_SCHEDULER_HANDOVER_WINDOW", "0")  # the pass's own cost: no web tier to pace for
    os.environ["EULER_JOB_ARRAY_MAX_COUNT"] = str(max(args.count, 10_000))
    import django

    django.setup()
    from django.conf import settings
    from django.db import connection

    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]  # the in-process API client's host
    settings.DEBUG = False

    if connection.vendor != "postgresql":
        sys.exit("set DATABASE_URL to PostgreSQL")
    connection.settings_dict["TEST"]["NAME"] = f"euler_bench_arrays_{os.getpid()}"
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False)
    try:
        run(args)
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


def run(args) -> None:
    from rest_framework.test import APIClient

    from jobs import services
    from jobs.models import Job
    from quotas.models import Quota
    from quotas.services import apikey_create, project_create

    project = project_create(name="bench-arrays")
    Quota.objects.update(max_concurrent_jobs=1_000_000, cpu_core_seconds=10**15)
    _, key = apikey_create(project=project, label="bench")
    api = APIClient()
    api.credentials(HTTP_X_EULER_API_KEY=key)
    per_node = -(-max(args.count, args.singles) // args.nodes) + 1
    _nodes(args.nodes, per_node)

    # 1. Submit: one request for the whole array, against single submits.
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        r = api.post("/api/v1/jobs", {**SPEC, "array": {"count": args.count}}, format="json")
        times.append(time.perf_counter() - t0)
        assert r.status_code == 201, r.content[:300]
        _clear_jobs()
    print(f"submit  array of {args.count:,} tasks, one POST /api/v1/jobs (in-process, PostgreSQL commit): "
          f"median {statistics.median(times) * 1000:.0f} ms (runs: {', '.join(f'{t * 1000:.0f}' for t in times)} ms)")  # fmt: skip
    sample = min(args.singles, args.sample)
    t0 = time.perf_counter()
    for _ in range(sample):
        assert api.post("/api/v1/jobs", SPEC, format="json").status_code == 201
    per_api = (time.perf_counter() - t0) / sample
    t0 = time.perf_counter()
    for _ in range(sample):
        services.job_submit(project=project, spec=dict(SPEC))
    per_service = (time.perf_counter() - t0) / sample
    print(f"submit  single jobs: {per_api * 1000:.1f} ms each over the API, {per_service * 1000:.1f} ms through "
          f"jobs.services.job_submit (means of {sample}): {args.singles:,} of them take {per_api * args.singles:.0f} s "
          f"over the API, {per_service * args.singles:.0f} s in-process")  # fmt: skip
    _clear_jobs()
    _bulk_singles(project, args.singles)  # the same 10,000 rows as singles submit would leave, written at once

    # 2. Placements per second: 10,000 queued singles against the array's 10,000 queued tasks.
    placed, took, passes = _pass_all()
    print(f"place   {placed:,} single jobs on {args.nodes:,} simulated nodes: {took:.2f} s in {passes} passes, "
          f"{placed / took:.0f} placements/s")  # fmt: skip
    _clear_jobs()
    api.post("/api/v1/jobs", {**SPEC, "array": {"count": args.count}}, format="json")
    placed, took, passes = _pass_all()
    print(f"place   {placed:,} array tasks of one array (no parallelism limit): {took:.2f} s in {passes} passes, "
          f"{placed / took:.0f} placements/s")  # fmt: skip
    _clear_jobs()

    # 3. A pass with tasks held back by parallelism costs what a pass over the runnable ones costs.
    from jobs.scheduling import cycle

    empty = statistics.median(_timed(cycle.one_pass) for _ in range(5))
    api.post("/api/v1/jobs", {**SPEC, "array": {"count": args.count, "parallelism": args.parallelism}}, format="json")
    _pass_all()
    held = statistics.median(_timed(cycle.one_pass) for _ in range(5))
    waiting = Job.objects.filter(state="waiting").count()
    print(f"pass    with {waiting:,} tasks waiting behind parallelism {args.parallelism} (all {args.parallelism} "
          f"placed): {held * 1000:.1f} ms; with an empty queue: {empty * 1000:.1f} ms")  # fmt: skip

    # 4. The array drained at its parallelism: each simulated report ends a task and releases the next index.
    t0, placed, rounds = time.perf_counter(), args.parallelism, 0
    limit = min(args.count, 6 * args.parallelism)
    while placed < limit:
        _end_assigned()
        placed += cycle.one_pass().placed
        rounds += 1
    took = time.perf_counter() - t0
    print(f"drain   {placed:,} tasks at parallelism {args.parallelism}: {took:.2f} s ({rounds} rounds of reports "
          f"and a pass), {placed / took:.0f} tasks/s (each end a report transaction that releases the next index)")  # fmt: skip


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


if __name__ == "__main__":
    main()
