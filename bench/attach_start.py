"""What the attach made before the start costs: create → start against create → attach → start, on the engine.

    .venv/bin/python bench/attach_start.py [--runs 40]

Alternates the two on the local Docker engine with the agent's own calls (DockerRunner, the agent's container
spec for `echo hi`), and prints p50/p99 of the time until `start` returned (what delays the job's `running`
report) and until the output's first byte was read (attach: from the attach; without: from a follow of the
engine's log, as the agent read before). Containers are removed as it goes.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nodeagent import containers  # noqa: E402
from nodeagent.docker_runner import DockerRunner  # noqa: E402


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def one(runner: DockerRunner, node: str, attempt_id: int, *, attach: bool) -> tuple[float, float]:
    spec = {
        "attempt_id": attempt_id,
        "job_id": 1,
        "attempt_number": 1,
        "image": "euler-test/busybox",
        "command": ["echo", "hi"],
        "cpu_milli": 500,
        "memory_bytes": 64 * 1024 * 1024,
        "timeout_seconds": 60,
    }
    kwargs = containers.create_kwargs(spec, node_name=node)
    t0 = time.perf_counter()
    cid, stream = runner.create_attach_and_start(kwargs, attach=attach)
    started = time.perf_counter() - t0
    try:
        frames = stream.frames() if stream is not None else iter(runner.logs(cid, follow=True))
        next(frames)
        first = time.perf_counter() - t0
    finally:
        if stream is not None:
            stream.close()
        runner.remove(cid)
    return started, first


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args()
    runner, node = DockerRunner(), f"bench-{uuid.uuid4().hex[:8]}"
    results: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    for i in range(args.runs):
        for attach in (i % 2 == 0, i % 2 == 1):
            results[attach].append(one(runner, node, 2 * i + attach, attach=attach))
    for attach, label in ((False, "create → start"), (True, "create → attach → start")):
        started = [s for s, _ in results[attach]]
        first = [f for _, f in results[attach]]
        print(
            f"{label:>24}: start returned p50 {pct(started, 50) * 1000:.0f} ms p99 {pct(started, 99) * 1000:.0f} ms;"
            f" first byte read p50 {pct(first, 50) * 1000:.0f} ms p99 {pct(first, 99) * 1000:.0f} ms"
            f" ({len(started)} runs)"
        )


if __name__ == "__main__":
    main()
