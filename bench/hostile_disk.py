"""Disk writer: time from a job crossing its `disk_bytes` to the stop of its container, on the local engine.

    .venv/bin/python bench/hostile_disk.py [--runs 10] [--limit-mib 16]

Each run starts a container that writes limit + 1 MiB in one `dd` (so it crosses the limit at the end of the
write) and then prints a marker; the agent's DiskGuard (the code the executor runs, measuring Docker's SizeRw)
watches it. The figure is the `die` event's time minus the moment the marker arrived on the log stream: it
measures the guard's polling delay plus the kill, and slightly understates the last MiB's write. Needs the
local Docker engine and the `euler-test/busybox` image. `measure()` is what bench/hostile.py folds in.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import docker  # noqa: E402

from nodeagent.disk import DiskGuard  # noqa: E402

IMAGE = "euler-test/busybox"
MIB = 1 << 20


def _one(client, limit_mib: int) -> float:
    api = client.api
    script = f"sleep 0.3; dd if=/dev/zero of=/fill bs=1M count={limit_mib + 1} 2>/dev/null; echo crossed; sleep 60"
    name = f"euler-bench-disk-{uuid.uuid4().hex[:8]}"
    cid = api.create_container(IMAGE, command=["sh", "-c", script], name=name, labels={"euler.bench": "disk"})["Id"]
    crossed: list[float] = []
    stopped = threading.Event()
    try:
        since = int(time.time()) - 1
        api.start(cid)
        guard = DiskGuard(api, cid, limit_mib * MIB, lambda message: stopped.set()).start()
        for line in api.logs(cid, stream=True, follow=True):
            if b"crossed" in line and not crossed:
                crossed.append(time.time())
        events = api.events(since=since, until=int(time.time()) + 1, decode=True, filters={"container": cid})
        died = [e["timeNano"] / 1e9 for e in events if e.get("status") == "die"]
        guard.stop()
        if not crossed or not died or not stopped.wait(10):
            raise RuntimeError(f"run failed: crossed={crossed} died={died} guard fired={stopped.is_set()}")
        return max(died[0] - crossed[0], 0.0)
    finally:
        api.remove_container(cid, force=True, v=True)


def measure(*, runs: int = 10, limit_mib: int = 16) -> dict[str, float]:
    """Seconds from crossing `disk_bytes` to the container's stop: p50, p99 (max of the runs) and mean."""
    client = docker.from_env()
    try:
        samples = sorted(_one(client, limit_mib) for _ in range(runs))
    finally:
        client.close()
    return {
        "runs": runs,
        "p50": statistics.median(samples),
        "p99": samples[min(len(samples) - 1, int(round(0.99 * (len(samples) - 1))))],
        "mean": statistics.fmean(samples),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--limit-mib", type=int, default=16)
    args = parser.parse_args()
    r = measure(runs=args.runs, limit_mib=args.limit_mib)
    print(
        f"disk_bytes crossed → container stopped, {r['runs']} runs, limit {args.limit_mib} MiB: "
        f"p50 {r['p50'] * 1000:.0f} ms, p99 {r['p99'] * 1000:.0f} ms, mean {r['mean'] * 1000:.0f} ms"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
