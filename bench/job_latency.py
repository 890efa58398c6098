"""Job latency: submit → running and submit → succeeded, p50/p99 over N jobs on one idle local node.

    .venv/bin/python bench/job_latency.py [--jobs 50]
    DATABASE_URL=postgres://root@127.0.0.1:5432/euler_bench .venv/bin/python bench/job_latency.py

Starts the real platform like the e2e tests do (uvicorn web, Celery worker and beat, one `./euler-node`
agent on the local Docker engine) on a throw-away SQLite database (or the database named by
DATABASE_URL: it is migrated, and the rows it creates are left there), submits each job over the HTTP
API when the previous one has ended, and reads the times the server recorded (attempt started, job
ended) against the client's clock just before the POST. The job is `echo hi` on the local image.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
IMAGE = "euler-test/busybox"


def boot(tmp: Path, env: dict | None = None):
    """Django on a fresh database, the platform processes, one approved agent. Returns (platform, http, node)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("EULER_DATA_DIR", str(tmp / "data"))
    os.environ.setdefault("DJANGO_DEBUG", "true")
    import logging

    import django

    django.setup()
    logging.getLogger("httpx").setLevel(logging.WARNING)
    import httpx
    from django.core.management import call_command

    from nodes.models import Node
    from nodes.services import enrollment_token_create, node_approve
    from quotas.services import apikey_create, project_create
    from tests.e2e.harness import Platform

    call_command("migrate", verbosity=0)
    platform = Platform(tmp / "platform", env={"EULER_NODE_HEARTBEAT_MIN_INTERVAL": "1", **(env or {})})
    platform.start()
    project = project_create(name=f"bench-{uuid.uuid4().hex[:6]}")
    _, key = apikey_create(project=project, label="bench")
    name = f"bench-{uuid.uuid4().hex[:6]}"
    _, token = enrollment_token_create(trust="platform", label="bench")
    agent = platform.start_agent(name, token=token)
    node = platform.wait_for(lambda: Node.objects.filter(name=name).first(), "the agent enrolls", timeout=120)
    node_approve(node=node, trust="platform", public_pool=True)
    platform.wait_for(lambda: "approved" in agent.log(), "the agent is approved", timeout=120)
    platform.wait_for(lambda: Node.objects.get(name=name).online, "the node is online", timeout=120)
    http = httpx.Client(base_url=platform.url + "/api/v1/", headers={"X-Euler-API-Key": key}, timeout=30)
    return platform, http, key


def settle(engine) -> None:
    """Until the engine holds no container of Euler's: each is waited for until removed (docker-py's low-level
    `wait` with condition `removed`; one already gone answers 404)."""
    import docker.errors

    for found in engine.containers(all=True, filters={"label": "euler.managed=true"}):
        try:
            engine.wait(found["Id"], condition="removed", timeout=60)
        except docker.errors.NotFound:
            pass


def submit(http, command: list[str], **over) -> int:
    body = {
        "name": "bench",
        "image": IMAGE,
        "command": command,
        "cpu_milli": 100,
        "memory_bytes": 32 * 1024 * 1024,
        "gpu_count": 0,
        "timeout_seconds": 60,
    } | over
    r = http.post("jobs", json=body)
    r.raise_for_status()
    return r.json()["id"]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="euler-bench-") as tmp:
        platform, http, _ = boot(Path(tmp))
        try:
            from jobs.models import Attempt, Job

            to_running, to_done, parts = [], [], {"assigned": [], "delivered": [], "running": []}
            for i in range(args.warmup + args.jobs):
                t0 = time.time()
                job_id = submit(http, ["echo", "hi"])
                job = platform.wait_for(
                    lambda job_id=job_id: Job.objects.filter(pk=job_id, ended_at__isnull=False).first(),
                    f"job {job_id} ends",
                    timeout=60,
                    every=0.02,
                )
                attempt = Attempt.objects.filter(job_id=job_id).order_by("number").first()
                if job.state != "succeeded" or attempt is None or attempt.started_at is None:
                    raise SystemExit(f"job {job_id} ended {job.state} ({job.reason})")
                if i >= args.warmup:
                    to_running.append(attempt.started_at.timestamp() - t0)
                    to_done.append(job.ended_at.timestamp() - t0)
                    parts["assigned"].append(attempt.created_at.timestamp() - t0)
                    parts["delivered"].append((attempt.delivered_at or attempt.created_at).timestamp() - t0)
                    parts["running"].append(attempt.started_at.timestamp() - t0)
            from django.db import connection

            print(f"job latency, {args.jobs} jobs one after another, one idle local node, {connection.vendor}")
            for label, values in (("submit → running", to_running), ("submit → succeeded", to_done)):
                print(
                    f"  {label:<20} p50 {pct(values, 50) * 1000:7.0f} ms   p99 {pct(values, 99) * 1000:7.0f} ms"
                    f"   mean {statistics.mean(values) * 1000:6.0f} ms   max {max(values) * 1000:6.0f} ms"
                )
            print(
                "  where the time goes (p50, from submit): "
                + ", ".join(f"{k} {pct(v, 50) * 1000:.0f} ms" for k, v in parts.items())
            )
        finally:
            platform.stop()


if __name__ == "__main__":
    main()
