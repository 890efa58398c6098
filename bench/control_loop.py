"""Control loop under hostile upstreams: hello-job latency and offline detection beside 100 bad agent instances.

    .venv/bin/python bench/control_loop.py [--jobs 30] [--gap 1.0] [--loris 50] [--flood 50]
    DATABASE_URL=postgres://root@127.0.0.1:5432/euler_bench .venv/bin/python bench/control_loop.py

Starts the real platform as `make up` does (uvicorn web; the control worker `-Q control` and the background
worker `-Q health,maintenance`, two processes each; beat) and two `./euler-node` agents on the local Docker
engine: `runner` runs the hello jobs (`alpine:3.20`, `echo hello`), `victim` runs nothing and is killed with -9.
Phase 1 submits a stream of hello jobs (one every --gap seconds) to the runner. Phase 2 starts --loris agent
instances whose health endpoint answers one byte per second and --flood instances with an endless fast body
(tests/agents/badupstreams.py, a process of its own, on loopback: EULER_AGENT_ALLOWED_NETWORKS opens it),
waits until the health worker has checked them all once, kills the victim agent with -9 and submits the same
stream again. Prints submit → running p50/p99 of both phases (read from the server's attempt times against the
client's clock just before each POST), the victim's offline detection time (kill → its `offline` event), the
peak RSS of each worker's process tree in each phase, how many bad instances ended unhealthy and how many
periodic runs were skipped. Every process it starts is stopped by its PID at the end.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
IMAGE = "alpine:3.20"


class RssSampler(threading.Thread):
    """Peak resident memory of each named process tree, per phase."""

    def __init__(self, pids: dict[str, int]) -> None:
        super().__init__(name="rss", daemon=True)
        self.pids, self.phase, self.peaks = pids, "boot", {}
        self.done = threading.Event()

    def run(self) -> None:
        import psutil

        while not self.done.wait(0.25):
            for name, pid in self.pids.items():
                try:
                    root = psutil.Process(pid)
                    rss = sum(p.memory_info().rss for p in [root, *root.children(recursive=True)])
                except psutil.Error:
                    continue
                key = (self.phase, name)
                self.peaks[key] = max(self.peaks.get(key, 0), rss)


def boot(tmp: Path, env: dict):
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("EULER_DATA_DIR", str(tmp / "data"))
    os.environ.setdefault("DJANGO_DEBUG", "true")
    os.environ["EULER_AGENT_ALLOWED_NETWORKS"] = "127.0.0.0/8"  # the bad agents live on loopback
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
    platform = Platform(tmp / "platform", env={"EULER_NODE_HEARTBEAT_MIN_INTERVAL": "1", **env})
    platform.start()
    project = project_create(name=f"bench-{uuid.uuid4().hex[:6]}")
    _, key = apikey_create(project=project, label="bench")
    names = {}
    for role in ("runner", "victim"):
        name = names[role] = f"{role}-{uuid.uuid4().hex[:6]}"
        _, token = enrollment_token_create(trust="platform", label="bench")
        agent = platform.start_agent(name, token=token, env={"EULER_NODE_LABELS": f"role={role}"})
        node = platform.wait_for(lambda name=name: Node.objects.filter(name=name).first(), f"{name} enrolls")
        node_approve(node=node, trust="platform", public_pool=True)
        platform.wait_for(lambda agent=agent: "approved" in agent.log(), f"{name} is approved")
        platform.wait_for(lambda name=name: Node.objects.get(name=name).online, f"{name} is online")
    http = httpx.Client(base_url=platform.url + "/api/v1/", headers={"X-Euler-API-Key": key}, timeout=30)
    return platform, http, project, names


def stream(platform, http, *, jobs: int, gap: float) -> tuple[list[float], list[float]]:
    """Submit `jobs` hello jobs `gap` seconds apart; returns submit → assigned (the control loop's part: the
    scheduling pass placed it) and submit → running of each, in seconds."""
    from jobs.models import Attempt, Job

    body = {"name": "hello", "image": IMAGE, "command": ["echo", "hello"], "cpu_milli": 100,
            "memory_bytes": 32 << 20, "gpu_count": 0, "timeout_seconds": 60, "node_selector": {"role": "runner"}}  # fmt: skip
    sent = []
    next_at = time.monotonic()
    for _ in range(jobs):
        time.sleep(max(0.0, next_at - time.monotonic()))
        next_at += gap
        t0 = time.time()
        r = http.post("jobs", json=body)
        r.raise_for_status()
        sent.append((r.json()["id"], t0))
    assigned, running = [], []
    for job_id, t0 in sent:
        job = platform.wait_for(
            lambda job_id=job_id: Job.objects.filter(pk=job_id, ended_at__isnull=False).first(),
            f"job {job_id} ends",
            timeout=120,
            every=0.05,
        )
        attempt = Attempt.objects.filter(job_id=job_id).order_by("number").first()
        if job.state != "succeeded" or attempt is None or attempt.started_at is None:
            raise SystemExit(f"job {job_id} ended {job.state} ({job.reason})")
        assigned.append(attempt.created_at.timestamp() - t0)
        running.append(attempt.started_at.timestamp() - t0)
    return assigned, running


def start_bad_upstreams(loris: int, flood: int) -> tuple[subprocess.Popen, list[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.agents.badupstreams", f"loris={loris}", f"flood={flood}", "--interval", "1"],
        cwd=REPO, stdout=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    urls = []
    for _ in range(loris + flood):
        line = proc.stdout.readline()
        if not line:
            proc.kill()
            raise SystemExit("the bad upstreams did not start")
        urls.append(line.split()[1])
    return proc, urls


def register_bad_agents(project, urls: list[str]) -> None:
    from agents.services import MAX_INSTANCES, agent_create

    for i in range(0, len(urls), MAX_INSTANCES // 2):
        chunk = urls[i : i + MAX_INSTANCES // 2]
        fields = {"name": f"bad-{i}", "health_interval_s": 2, "health_timeout_s": 60.0}
        agent_create(project=project, fields=fields, instances=[{"base_url": u} for u in chunk])


def settle(node_name: str, timeout: float = 20) -> None:
    import docker

    from nodeagent import protocol

    client = docker.from_env()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if not client.containers.list(all=True, filters={"label": f"{protocol.LABEL_NODE}={node_name}"}):
                return
            time.sleep(0.5)
    finally:
        client.close()


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


def skipped_runs() -> dict[str, int]:
    from euler.redis import client

    out = {}
    for key, value in client().hgetall("euler:metrics:counters").items():
        key = key.decode()
        if key.startswith("euler_tasks_skipped_total{"):
            out[key.split('"')[1]] = int(float(value))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=30)
    parser.add_argument("--gap", type=float, default=1.0)
    parser.add_argument("--loris", type=int, default=50)
    parser.add_argument("--flood", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--offline-check-every", type=float, help="EULER_NODE_OFFLINE_CHECK_EVERY (default 5 s)")
    args = parser.parse_args()
    env = {}
    if args.offline_check_every:
        env["EULER_NODE_OFFLINE_CHECK_EVERY"] = str(args.offline_check_every)
    bad_proc = None
    with tempfile.TemporaryDirectory(prefix="euler-bench-") as tmp:
        platform, http, project, names = boot(Path(tmp), env)
        sampler = RssSampler({n: platform.procs[n].pid for n in ("worker-control", "worker")})
        sampler.start()
        try:
            from agents.models import AgentInstance, Health
            from nodes.models import EventKind, Node, NodeEvent

            stream(platform, http, jobs=args.warmup, gap=args.gap)
            sampler.phase = "quiet"
            quiet_assigned, quiet = stream(platform, http, jobs=args.jobs, gap=args.gap)

            sampler.phase = "hostile"
            bad_proc, urls = start_bad_upstreams(args.loris, args.flood)
            register_bad_agents(project, urls)
            platform.wait_for(
                lambda: not AgentInstance.objects.filter(agent__project=project, last_check_at=None).exists(),
                "every bad instance checked once",
                timeout=120,
            )
            victim = Node.objects.get(name=names["victim"])
            killed_at = time.time()
            platform.kill_agent(names["victim"])
            hostile_assigned, hostile = stream(platform, http, jobs=args.jobs, gap=args.gap)
            event = platform.wait_for(
                lambda: NodeEvent.objects.filter(node=victim, kind=EventKind.OFFLINE).first(),
                "the killed node goes offline",
                timeout=120,
                every=0.1,
            )
            detected = event.created_at.timestamp() - killed_at
            mine = AgentInstance.objects.filter(agent__project=project)
            unhealthy = mine.filter(health=Health.UNHEALTHY).count()
            checked = mine.exclude(last_check_at=None).count()
            sampler.done.set()
            sampler.join(5)

            from django.db import connection

            print(
                f"control loop, {args.jobs} hello jobs ({IMAGE}, echo hello) {args.gap:g} s apart on one node,"
                f" {connection.vendor}; workers: control -c 2, background -c 2"
            )
            bad_label = f"{args.loris} loris + {args.flood} flood"
            for what, label, values in (
                ("running ", "without bad agents", quiet),
                ("running ", bad_label, hostile),
                ("assigned", "without bad agents", quiet_assigned),
                ("assigned", bad_label, hostile_assigned),
            ):
                print(
                    f"  submit → {what}, {label:<22} p50 {pct(values, 50) * 1000:6.0f} ms"
                    f"   p99 {pct(values, 99) * 1000:6.0f} ms   max {max(values) * 1000:6.0f} ms"
                )
            print(
                f"  ratio with/without: p50 {pct(hostile, 50) / pct(quiet, 50):.2f}×,"
                f" p99 {pct(hostile, 99) / pct(quiet, 99):.2f}×"
            )
            every = args.offline_check_every or 5
            print(
                f"  offline detection (kill -9 → offline event, offline after 30 s, checked every {every:g} s):"
                f" {detected:.1f} s"
            )
            print(f"  bad instances unhealthy at the end: {unhealthy}/{len(urls)} ({checked} checked at least once)")
            for phase in ("quiet", "hostile"):
                print(
                    f"  peak RSS, {phase:<8}: "
                    + ", ".join(
                        f"{n} {sampler.peaks.get((phase, n), 0) / 2**20:.0f} MiB" for n in ("worker-control", "worker")
                    )
                )
            print(f"  periodic runs skipped (single-flight): {skipped_runs() or 'none'}")
        finally:
            sampler.done.set()
            if bad_proc is not None:
                bad_proc.terminate()
                try:
                    bad_proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    bad_proc.kill()
                    bad_proc.wait()
            http.close()
            settle(names["runner"])  # the agent removes its last containers before it is stopped
            platform.stop()


if __name__ == "__main__":
    main()
