"""Preemption latency: preemption decision → victim stopped → higher-class job running, p50/p99 (the `preempt`
section of issue 36's interruptions bench; bench/interruptions.py may import `run` from here).

    .venv/bin/python bench/interruptions_preempt.py [--runs 20] [--grace 5] [--ignore-term]
    .venv/bin/python bench/interruptions_preempt.py --pure    # the policy's decision cost alone
    DATABASE_URL=postgres://root@127.0.0.1:5432/euler_bench .venv/bin/python bench/interruptions_preempt.py

Starts the real platform as bench/job_latency.py does (web, worker, beat, one `./euler-node` agent on the local
Docker engine), caps the node at 1000 millicores (EULER_NODE_MAX_CPU_MILLI), and per run: a job of the default
class fills the node and runs; a job of class `urgent` (value 100) of another project is submitted; the pass
preempts the first. The figures come from the times the server recorded: the Preemption row (decision), the
victim's attempt's end (stopped: the agent's report after SIGTERM, or SIGKILL at the grace with --ignore-term),
and the urgent job's attempt start (running). Target (issue 36): running ≤ grace + 5 s.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

TRAP = 'trap "exit 143" TERM; '
SETTINGS = {
    "EULER_PREEMPT_MIN_RUN_SECONDS": "0",
    "EULER_PREEMPT_MAX_PER_HOUR": "1000",
    "EULER_SCHEDULER_INTERVAL": "1",
    "EULER_NODE_HEARTBEAT_MIN_INTERVAL": "0.5",
}


def run(runs: int, *, grace: int, ignore_term: bool) -> dict[str, list[float]]:
    """Boot, measure `runs` preemptions, stop; returns the seconds of each phase per run."""
    import os

    from job_latency import boot

    for k, v in SETTINGS.items():
        os.environ.setdefault(k, v)
    with tempfile.TemporaryDirectory(prefix="euler-bench-") as tmp:
        platform, low_http, _ = boot(Path(tmp), env={**SETTINGS, "EULER_NODE_MAX_CPU_MILLI": "1000"})
        try:
            return measure(platform, low_http, runs=runs, grace=grace, ignore_term=ignore_term, cpu_milli=1000)
        finally:
            platform.stop()


def measure(platform, low_http, *, runs: int, grace: int, ignore_term: bool, cpu_milli: int) -> dict[str, list[float]]:
    """`runs` preemptions on the platform's node, whose CPU `cpu_milli` one job fills; the platform runs with
    SETTINGS (no minimum run)."""
    import httpx
    from job_latency import submit

    from jobs.models import Attempt, Job, Preemption
    from quotas.models import PriorityClass
    from quotas.services import apikey_create, project_create

    urgent = PriorityClass.objects.get_or_create(name="urgent", defaults={"value": 100})[0]
    high = project_create(name=f"bench-high-{uuid.uuid4().hex[:6]}")
    high.max_priority_class = urgent
    high.save()
    _, key = apikey_create(project=high, label="bench")
    high_http = httpx.Client(base_url=platform.url + "/api/v1/", headers={"X-Euler-API-Key": key}, timeout=30)
    loop = "while true; do sleep 0.2; done"
    command = ["sh", "-c", ('trap "" TERM; ' if ignore_term else TRAP) + loop]
    figures: dict[str, list[float]] = {"submit → decision": [], "decision → stopped": [], "decision → running": []}
    for _ in range(runs):
        victim = submit(low_http, command, cpu_milli=cpu_milli, stop_grace_seconds=grace, timeout_seconds=600)
        platform.wait_for(
            lambda victim=victim: Job.objects.get(pk=victim).state == "running", "the victim runs", every=0.05
        )
        before = Job.objects.get(pk=victim).queued_at
        urgent_id = submit(high_http, ["true"], cpu_milli=cpu_milli, priority_class="urgent")
        submitted = Job.objects.get(pk=urgent_id).created_at
        started = platform.wait_for(
            lambda urgent_id=urgent_id: Attempt.objects.filter(job_id=urgent_id, started_at__isnull=False).first(),
            "the urgent job runs",
            timeout=grace + 60,
            every=0.05,
        )
        decided = Preemption.objects.get(preemptor_id=urgent_id).created_at
        stopped = Attempt.objects.filter(job_id=victim).order_by("number").first().ended_at
        figures["submit → decision"].append((decided - submitted).total_seconds())
        figures["decision → stopped"].append((stopped - decided).total_seconds())
        figures["decision → running"].append((started.started_at - decided).total_seconds())
        platform.wait_for(
            lambda urgent_id=urgent_id: Job.objects.get(pk=urgent_id).ended_at is not None, "the urgent job ends"
        )
        assert Job.objects.get(pk=victim).queued_at > before  # it went back to the queue
        low_http.post(f"jobs/{victim}/cancel").raise_for_status()
        platform.wait_for(
            lambda victim=victim: not Attempt.objects.filter(job_id=victim, state__in=["assigned", "running"]).exists(),
            "the victim's next attempt is gone",
            timeout=grace + 60,
        )
    return figures


def section(b, args) -> None:
    """bench/interruptions.py's `preempt` section: a victim that traps SIGTERM, then one that ignores it."""
    for ignore_term in (False, True):
        figures = measure(b.platform, b.http, runs=args.runs, grace=args.grace, ignore_term=ignore_term,
                          cpu_milli=b.node.cpu_milli)  # fmt: skip
        report(figures, grace=args.grace, ignore_term=ignore_term)


def report(figures: dict[str, list[float]], *, grace: int, ignore_term: bool) -> None:
    from django.db import connection
    from job_latency import pct

    how = "ignores SIGTERM (SIGKILL at the grace)" if ignore_term else "traps SIGTERM (stops at once)"
    runs = len(next(iter(figures.values())))
    print(f"preempt: {runs} preemptions on a full node, victim {how}, grace {grace} s, {connection.vendor}")
    for label, values in figures.items():
        print(f"  {label:<20} p50 {pct(values, 50):6.2f} s   p99 {pct(values, 99):6.2f} s   max {max(values):6.2f} s")
    print(f"  target: decision → running ≤ grace + 5 s = {grace + 5} s")


def pure(nodes: int, per_node: int, preemptors: int, repeat: int) -> None:
    """The policy alone: a full pool of lower-class jobs and a burst of higher-class ones; one pass decides."""
    import random
    import time

    from jobs.scheduling import policy
    from jobs.scheduling.snapshots import JobSnapshot, NodeSnapshot
    from jobs.scheduling.victims import Guards, Running

    gib, now, rnd = 1024**3, 100_000.0, random.Random(7)
    running, snaps, aid = [], [], 0
    for n in range(1, nodes + 1):
        mine = []
        for _ in range(per_node):
            aid += 1
            mine.append(Running(attempt_id=aid, job_id=aid, project_id=1 + aid % 5, node_id=n,
                                priority_value=rnd.choice((-10, 0, 0, 5)), cpu_milli=4000 // per_node,
                                memory_bytes=gib, started_at=now - rnd.uniform(100, 10_000)))  # fmt: skip
        running += mine
        snaps.append(NodeSnapshot(id=n, name=f"n{n}", cpu_milli=4000, memory_bytes=64 * gib, trust="platform",
                                  used_cpu_milli=4000, used_memory_bytes=per_node * gib))  # fmt: skip
    jobs = [JobSnapshot(id=10**7 + i, project_id=9, cpu_milli=rnd.choice((1000, 2000, 3000)), memory_bytes=gib,
                        queued_at=float(i), priority_value=10) for i in range(preemptors)]  # fmt: skip
    times, plan = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        plan = policy.place(jobs, snaps, now=now, running=running, guards=Guards(min_run_seconds=60, max_per_hour=3))
        times.append(time.perf_counter() - t0)
    best = min(times)
    print(f"preempt, pure policy: {nodes} full nodes x {per_node} lower-class jobs, {preemptors} higher-class jobs "
          f"queued: one pass {best * 1000:.1f} ms (best of {repeat}), {len(plan.preemptions)} preemptions decided "
          f"(at most {policy.preemption.MAX_PER_PASS} a pass), {best / max(1, len(plan.preemptions)) * 1e6:.0f} µs each")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--grace", type=int, default=5, help="the victim's stop_grace_seconds")
    parser.add_argument("--ignore-term", action="store_true", help="the victim ignores SIGTERM: killed at the grace")
    parser.add_argument("--pure", action="store_true", help="only the policy's decision cost, no platform")
    args = parser.parse_args()
    if args.pure:
        for nodes in (100, 1000):
            pure(nodes, 8, 200, repeat=3)
        return
    figures = run(args.runs, grace=args.grace, ignore_term=args.ignore_term)
    report(figures, grace=args.grace, ignore_term=args.ignore_term)


if __name__ == "__main__":
    main()
