"""Console benchmark: server time and SQL queries per page with a busy project.

    .venv/bin/python bench/console_pages.py [--jobs 2000] [--invocations 20000] [--rounds 30]

Seeds a throw-away SQLite database (or uses DATABASE_URL: then it must be a database you can
spare) with one project holding many jobs (each with an attempt and events), nodes, agents and a
day of invocations, then renders each console page `rounds` times in-process and prints p50/p95
milliseconds and the number of SQL queries per render (flat query counts mean no N+1 loops).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def setup(data_dir: str) -> None:
    os.environ.setdefault("EULER_DATA_DIR", data_dir)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("DJANGO_DEBUG", "true")
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    settings.ALLOWED_HOSTS = ["testserver"]
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    call_command("migrate", verbosity=0)


def seed(n_jobs: int, n_invocations: int):
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from agents.models import Agent, AgentInstance
    from gateway.models import Invocation
    from jobs.models import Attempt, Job, JobEvent
    from nodes.models import Node
    from quotas.models import UsageEntry
    from quotas.services import project_create

    user = get_user_model().objects.create_user(username=f"bench-{time.time_ns()}", password="pw")
    project = project_create(name=f"bench-{time.time_ns()}", owner=user)
    now = timezone.now()
    nodes = [
        Node(
            name=f"bench-{project.pk}-{i}",
            owner_project=project,
            approval="approved",
            online=True,
            last_heartbeat_at=now,
            cpu_milli=32000,
            memory_bytes=128 << 30,
            gpus=[{"uuid": f"GPU-{i}-{g}", "index": g, "model": "A10", "memory_bytes": 24 << 30} for g in range(4)],
        )  # fmt: skip
        for i in range(20)
    ]
    Node.objects.bulk_create(nodes)
    states = ["queued", "running", "succeeded", "failed", "cancelled"]
    jobs = Job.objects.bulk_create(
        Job(
            project=project,
            name=f"job-{i}",
            image="alpine:3.20",
            command=["echo", str(i)],
            cpu_milli=500,
            memory_bytes=64 << 20,
            timeout_seconds=60,
            state=states[i % len(states)],
            queued_at=now,
            pending_reason="3 nodes lack 2 free GPUs" if i % len(states) == 0 else "",
        )  # fmt: skip
        for i in range(n_jobs)
    )
    Attempt.objects.bulk_create(
        Attempt(job=j, number=1, node_name="bench-node", cpu_milli=500, memory_bytes=64 << 20, state="running")
        for j in jobs
    )
    JobEvent.objects.bulk_create(
        JobEvent(job=j, from_state=a, to_state=b) for j in jobs for a, b in (("", "queued"), ("queued", "assigned"))
    )
    agent = Agent.objects.create(project=project, name="echo")
    instances = AgentInstance.objects.bulk_create(
        AgentInstance(agent=agent, base_url=f"https://echo-{i}.example", health="healthy") for i in range(3)
    )
    Invocation.objects.bulk_create(
        Invocation(
            project=project,
            agent=agent,
            instance=instances[i % 3],
            method="POST",
            path="/v1",
            status=200 if i % 20 else 502,
            latency_ms=5 + i % 50,
            created_at=now - timedelta(seconds=i * 86400 / n_invocations),
        )  # fmt: skip
        for i in range(n_invocations)
    )
    UsageEntry.objects.bulk_create(
        UsageEntry(project=project, day=(now - timedelta(days=d)).date(), resource=r, amount=3600 * (d + 1))
        for d in range(30)
        for r in ("cpu_core_seconds", "invocations")
    )
    return user, jobs[0]


def measure(client, url: str, rounds: int) -> tuple[float, float, int]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    times = []
    queries = 0
    for _ in range(rounds):
        with CaptureQueriesContext(connection) as ctx:
            start = time.perf_counter()
            response = client.get(url)
            times.append((time.perf_counter() - start) * 1000)
        assert response.status_code == 200, (url, response.status_code)
        queries = len(ctx.captured_queries)
    times.sort()
    return statistics.median(times), times[max(0, int(len(times) * 0.95) - 1)], queries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--invocations", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="euler-bench-console-") as data_dir:
        setup(data_dir)
        from django.db import connection
        from django.test import Client

        user, job = seed(args.jobs, args.invocations)
        client = Client()
        client.force_login(user)
        print(f"database: {connection.vendor}; {args.jobs} jobs, {args.invocations} invocations, {args.rounds} rounds")
        print(f"{'page':<28}{'p50 ms':>10}{'p95 ms':>10}{'queries':>10}")
        pages = ["/", "/jobs/", "/jobs/?state=queued", f"/jobs/{job.pk}/", "/jobs/new/", "/nodes/", "/agents/"]
        pages += ["/agents/echo/?window=24h", "/agents/echo/?window=7d", "/keys/", "/members/", "/usage/"]
        for url in pages:
            p50, p95, queries = measure(client, url, args.rounds)
            print(f"{url:<28}{p50:>10.1f}{p95:>10.1f}{queries:>10}")


if __name__ == "__main__":
    main()
