"""Log latency: from a line printed in the container to the websocket client, p50/p95.

    .venv/bin/python bench/log_latency.py [--lines 100] [--every 0.1]

Boots the platform and one local agent like bench/job_latency.py, subscribes to the job's log websocket
before the job starts, and runs a job that prints the host's uptime (/proc/uptime, CLOCK_BOOTTIME,
10 ms resolution, shared by the container) every `--every` seconds. Each received line's delay is
CLOCK_BOOTTIME at receipt minus the printed time (so the figures include up to 10 ms of truncation).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.job_latency import boot, pct, submit  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=100)
    parser.add_argument("--every", type=float, default=0.1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="euler-bench-") as tmp:
        platform, http, key = boot(Path(tmp))
        try:
            from websockets.sync.client import connect

            script = f"for i in $(seq 1 {args.lines}); do cut -d' ' -f1 /proc/uptime; sleep {args.every}; done"
            job_id = submit(http, ["sh", "-c", "sleep 1; " + script], timeout_seconds=600)
            delays: list[float] = []
            url = platform.url.replace("http://", "ws://") + f"/ws/jobs/{job_id}/logs/"
            ready = threading.Event()
            with connect(url, additional_headers={"X-Euler-API-Key": key}, origin=platform.url) as ws:
                ready.set()
                while True:
                    message = json.loads(ws.recv(timeout=120))
                    now = time.clock_gettime(time.CLOCK_BOOTTIME)
                    if message["type"] == "end":
                        break
                    if message["type"] != "log":
                        continue
                    for line in message["data"].splitlines():
                        delays.append(now - float(line))
            from jobs.models import LogChunk

            # Where the time goes: printed → stored (agent + ingest) from the chunk's created_at.
            wall_minus_boot = time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)
            stored = []
            for chunk in LogChunk.objects.filter(attempt__job_id=job_id):
                at = chunk.created_at.timestamp() - wall_minus_boot
                stored += [at - float(line) for line in chunk.data.splitlines()]
            print(f"log latency, {len(delays)} lines, one every {args.every} s")
            for label, values in (("printed → websocket", delays), ("printed → stored", stored)):
                print(
                    f"  {label:<20} p50 {pct(values, 50) * 1000:6.0f} ms   p95 {pct(values, 95) * 1000:6.0f} ms"
                    f"   max {max(values) * 1000:6.0f} ms"
                )
        finally:
            platform.stop()


if __name__ == "__main__":
    main()
