"""Disk writer: time from a job crossing its `disk_bytes` to the stop of its container, on the local engine.

    .venv/bin/python bench/hostile_disk.py [--runs 10] [--limit-mib 16] [--volume] [--walk-files 200000]

Each run starts a container that writes limit + 1 MiB in one `dd` (so it crosses the limit at the end of the
write) and then prints a marker; the agent's DiskGuard (the code the executor runs: a walk of the writable layer's
directory by allocated blocks and inodes, plus each volume mount) watches it. With `--volume` the container's image declares `VOLUME /data`
(built from `euler-test/busybox`) and the job writes there, outside its writable layer. The figure is the
`die` event's time minus the moment the marker arrived on the log stream: it measures the guard's polling
delay plus the kill, and slightly understates the last MiB's write. Then the guard's cost on a tree of many
small files: one `tree_bytes` walk of `--walk-files` files (in 1000-file directories, in a temporary
directory here), and the wait `next_check_in` puts after it. Needs the local Docker engine and the
`euler-test/busybox` image. `measure()` is what bench/hostile.py folds in.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import docker  # noqa: E402

from nodeagent.disk import DiskGuard  # noqa: E402
from nodeagent.disk_limits import next_check_in  # noqa: E402
from nodeagent.disk_walk import tree_bytes  # noqa: E402

IMAGE = "euler-test/busybox"
VOLUME_IMAGE = "euler-test/busybox-volume"
MIB = 1 << 20


def volume_image(client) -> str:
    client.images.build(fileobj=io.BytesIO(b'FROM euler-test/busybox\nVOLUME ["/data"]\n'), tag=VOLUME_IMAGE)
    return VOLUME_IMAGE


def _one(client, limit_mib: int, *, volume: bool = False) -> float:
    api = client.api
    target = "/data/fill" if volume else "/fill"
    write = f"dd if=/dev/zero of={target} bs=1M count={limit_mib + 1} 2>/dev/null"
    script = f"sleep 0.3; {write}; echo crossed; sleep 60"
    name = f"euler-bench-disk-{uuid.uuid4().hex[:8]}"
    image = VOLUME_IMAGE if volume else IMAGE
    cid = api.create_container(image, command=["sh", "-c", script], name=name, labels={"euler.bench": "disk"})["Id"]
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


def measure(*, runs: int = 10, limit_mib: int = 16, volume: bool = False) -> dict[str, float]:
    """Seconds from crossing `disk_bytes` to the container's stop: p50, p99 (max of the runs) and mean."""
    client = docker.from_env()
    try:
        if volume:
            volume_image(client)
        samples = sorted(_one(client, limit_mib, volume=volume) for _ in range(runs))
    finally:
        client.close()
    return {
        "runs": runs,
        "p50": statistics.median(samples),
        "p99": samples[min(len(samples) - 1, int(round(0.99 * (len(samples) - 1))))],
        "mean": statistics.fmean(samples),
    }


def walk_cost(files: int) -> tuple[float, int]:
    """Seconds one `tree_bytes` walk takes over `files` one-byte files, and the bytes it counted."""
    with tempfile.TemporaryDirectory(prefix="euler-bench-walk-") as root:
        for d in range(0, files, 1000):
            sub = os.path.join(root, f"d{d // 1000}")
            os.mkdir(sub)
            for f in range(min(1000, files - d)):
                with open(os.path.join(sub, str(f)), "wb") as out:
                    out.write(b"x")
        began = time.perf_counter()
        counted = tree_bytes(root)
        return time.perf_counter() - began, counted


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--limit-mib", type=int, default=16)
    parser.add_argument("--volume", action="store_true", help="write into an image VOLUME, not the writable layer")
    parser.add_argument("--walk-files", type=int, default=200_000, help="files for the walk-cost figure (0: skip)")
    args = parser.parse_args()
    r = measure(runs=args.runs, limit_mib=args.limit_mib, volume=args.volume)
    where = "an image VOLUME" if args.volume else "the writable layer"
    print(
        f"disk_bytes crossed in {where} → container stopped, {r['runs']} runs, limit {args.limit_mib} MiB: "
        f"p50 {r['p50'] * 1000:.0f} ms, p99 {r['p99'] * 1000:.0f} ms, mean {r['mean'] * 1000:.0f} ms"
    )
    if args.walk_files:
        seconds, counted = walk_cost(args.walk_files)
        print(
            f"guard walk of {args.walk_files} files: {seconds * 1000:.0f} ms "
            f"({seconds / args.walk_files * 1e6:.1f} µs per file, {counted} bytes allocated); "
            f"next measurement {next_check_in(seconds):.1f} s later"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
