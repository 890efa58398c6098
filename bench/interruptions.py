"""Interruptions (issue 36): how fast a machine is given back and a stopped job moves on. One section per kind of
interruption, chosen by flags (none: every section that is implemented).

    .venv/bin/python bench/interruptions.py [--reclaim] [--runs 10] [--grace 5]
    (later sections: --preempt, --checkpoint; each adds its own flag, function and SECTIONS entry)

Boots the platform and one local agent like bench/job_latency.py, then per section:

reclaim. A running job is reclaimed with its node's own request (what `euler-node reclaim --grace G` sends), and
   the time from the POST to the node being free is measured: no active attempt on it in the database and no
   container of it in the engine. Two jobs: one that traps SIGTERM and exits at once (node free ≈ the stop's
   round trip), one that ignores SIGTERM (node free ≈ G + the SIGKILL's round trip; target ≤ G + 2 s). The node is
   resumed after each run. Also printed: cancel → container gone for a SIGTERM-ignoring job with a 2 s grace (the
   "gone at grace + 2 s" limit of every stop).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.job_latency import boot, pct, submit  # noqa: E402

TRAPS = 'trap "exit 0" TERM; echo ready; while true; do sleep 1 & wait $!; done'
IGNORES = 'trap "" TERM; echo ready; while true; do sleep 1; done'


class Bench:
    """What the sections share: the platform, the user's API client, the engine, the node and its credential."""

    def __init__(self, platform, http):
        import docker
        import httpx

        from nodes.models import Node

        self.platform, self.http = platform, http
        self.api = docker.from_env().api
        self.node = Node.objects.get()
        agent = next(iter(platform.agents.values()))
        credential = (agent.state_dir / "credential").read_text().strip()
        self.node_http = httpx.Client(
            base_url=platform.url + "/node-api/v1/", headers={"Authorization": f"Bearer {credential}"}, timeout=30
        )

    def wait_running(self, job_id: int) -> dict:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            job = self.http.get(f"jobs/{job_id}").json()
            if job["state"] == "running" and "ready" in self.http.get(f"jobs/{job_id}/logs").text:
                return job
            time.sleep(0.01)
        raise RuntimeError(f"job {job_id} did not start")

    def containers(self) -> list[dict]:
        return self.api.containers(all=True, filters={"label": [f"euler.node={self.node.name}"]})

    def node_free(self) -> bool:
        from jobs.models import Attempt
        from jobs.states import ATTEMPT_ACTIVE

        return not Attempt.objects.filter(node=self.node, state__in=ATTEMPT_ACTIVE).exists() and not self.containers()

    def wait(self, check, what: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not happen")
            time.sleep(0.005)


def reclaim(b: Bench, args) -> None:
    for label, script in (("traps SIGTERM, exits at once", TRAPS), ("ignores SIGTERM", IGNORES)):
        times = []
        for _ in range(args.runs):
            job_id = submit(b.http, ["sh", "-c", script], timeout_seconds=600, stop_grace_seconds=60)
            b.wait_running(job_id)
            t0 = time.monotonic()
            r = b.node_http.post("reclaim", json={"grace": args.grace})
            r.raise_for_status()
            b.wait(b.node_free, "the node freed")
            times.append(time.monotonic() - t0)
            b.http.post(f"jobs/{job_id}/cancel").raise_for_status()  # requeued, waiting: cancelled at once
            b.node_http.post("resume", json={}).raise_for_status()
        print(
            f"reclaim → node free, grace {args.grace} s, job {label}, {args.runs} runs: "
            f"p50 {pct(times, 50):.2f} s, p99 {pct(times, 99):.2f} s, max {max(times):.2f} s "
            f"(over the grace: p99 {max(0.0, pct(times, 99) - (args.grace if script == IGNORES else 0)):.2f} s)"
        )
    times = []
    for _ in range(args.runs):
        job_id = submit(b.http, ["sh", "-c", IGNORES], timeout_seconds=600, stop_grace_seconds=2)
        b.wait_running(job_id)
        t0 = time.monotonic()
        b.http.post(f"jobs/{job_id}/cancel").raise_for_status()
        b.wait(lambda: not b.containers(), "the container gone")
        times.append(time.monotonic() - t0)
    print(
        f"cancel → container gone, SIGTERM ignored, grace 2 s, {args.runs} runs: p50 {pct(times, 50):.2f} s, "
        f"p99 {pct(times, 99):.2f} s (limit: grace + 2 s = 4 s)"
    )


# name -> (what it measures, function); preempt and checkpoint add theirs here.
SECTIONS = {
    "reclaim": ("reclaim → node free; a SIGTERM-ignoring job gone at grace + 2 s", reclaim),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, (what, _fn) in SECTIONS.items():
        parser.add_argument(f"--{name}", action="store_true", help=what)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--grace", type=int, default=5, help="the reclaim's grace (seconds)")
    args = parser.parse_args()
    chosen = [name for name in SECTIONS if getattr(args, name)] or list(SECTIONS)
    with tempfile.TemporaryDirectory(prefix="euler-bench-") as tmp:
        platform, http, _key = boot(Path(tmp))
        try:
            b = Bench(platform, http)
            for name in chosen:
                SECTIONS[name][1](b, args)
        finally:
            platform.stop()


if __name__ == "__main__":
    main()
