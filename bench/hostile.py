"""Hostile jobs: log bytes lost below the cap by output rate, the engine's log during a flood, cancel → gone.

    .venv/bin/python bench/hostile.py [--cancels 20] [--flood-mb 300] [--disk-runs 20]

Boots the platform and one local agent like bench/job_latency.py (defaults: EULER_MAX_LOG_BYTES 10 MiB,
EULER_NODE_MAX_CONTAINER_LOG_BYTES 64 MiB, stop grace 10 s), then:

1. bytes lost below the cap: jobs print ~6.9 MB of `seq` output (below the cap) at increasing rates, the last
   one as fast as the container can, then 6 MB of 2-byte lines (`yes | head -n 3000000`, ~210 MB of engine
   log) as fast as it can; the stored log is compared with the expected text byte for byte. Also printed: the
   job's run time (the agent reads the attached output with backpressure: a fast job runs at the agent's pace).
2. peak engine log bytes during a flood: a job writes `--flood-mb` MB of 1 KB lines as fast as it can; the
   container's json-file LogPath (and its rotated siblings) is sampled every ~5 ms until the container is gone.
   Also printed: the job's end state and the delay from the container's exit (engine's FinishedAt) to the job's end.
3. cancel → container gone: `sleep 120` (no SIGTERM trap) is cancelled once running; the time from the POST to
   the container disappearing from the engine, p50/p99 over `--cancels` jobs.
4. time from crossing disk_bytes to the stop: bench/hostile_disk.py's measure() (the agent's DiskGuard on the
   local engine), p50/p99 over `--disk-runs` containers.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.job_latency import boot, pct, submit  # noqa: E402

SEQ_LINES = 1_000_000  # 6,888,896 bytes of `seq` output: below the 10 MiB cap
RATES_MB_S = [1, 4, 16, None]  # None: as fast as the container writes


def wait_end(http, job_id: int, timeout: float = 300) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = http.get(f"jobs/{job_id}").json()
        if job["state"] in ("succeeded", "failed", "cancelled", "lost"):
            return job
        time.sleep(0.05)
    raise RuntimeError(f"job {job_id} did not end")


def wait_running(http, job_id: int) -> dict:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        job = http.get(f"jobs/{job_id}").json()
        if job["state"] == "running":
            return job
        time.sleep(0.01)
    raise RuntimeError(f"job {job_id} did not start")


def containers_of(api, attempt: dict) -> list[dict]:
    """The attempt's containers (by attempt and node: other runs on this engine reuse attempt ids)."""
    labels = [f"euler.attempt={attempt['id']}", f"euler.node={attempt['node']}"]
    return api.containers(all=True, filters={"label": labels})


def seq_script(rate_mb_s: float | None) -> str:
    if rate_mb_s is None:
        return f"seq 1 {SEQ_LINES}"
    blocks = 50
    per = SEQ_LINES // blocks
    pause = 6_888_896 / blocks / (rate_mb_s * 1e6)
    return (
        f"i=0; while [ $i -lt {blocks} ]; do seq $((i*{per}+1)) $((i*{per}+{per})); sleep {pause:.3f}; i=$((i+1)); done"
    )


YES_LINES = 3_000_000  # 6,000,000 bytes of "y\n": the shortest lines, the most engine log per byte


def lost_below_cap(http) -> None:
    seq_text = "".join(f"{i}\n" for i in range(1, SEQ_LINES + 1))
    print(f"1. bytes lost below the cap ({len(seq_text):,} bytes of `seq` output per job, cap 10 MiB)")
    runs = [(f"{rate} MB/s" if rate else "unlimited", seq_script(rate), seq_text) for rate in RATES_MB_S]
    runs.append(("yes, unlimited", f"yes | head -n {YES_LINES}", "y\n" * YES_LINES))
    for label, script, expected in runs:
        t0 = time.monotonic()
        job_id = submit(http, ["sh", "-c", script], timeout_seconds=600, cpu_milli=1000)
        job = wait_end(http, job_id)
        took = time.monotonic() - t0
        text = http.get(f"jobs/{job_id}/logs").text
        common = 0
        for a, b in zip(text, expected, strict=False):
            if a != b:
                break
            common += 1
        lost = len(expected) - common
        truncated = job["attempts"][0]["log_truncated"]
        print(
            f"   {label:>14}: {job['state']}, stored {len(text.encode()):,} bytes, "
            f"exact {text == expected}, lost {lost:,} bytes, log_truncated {truncated}, submit → end {took:.1f} s"
        )


def engine_log_bytes(log_path: str) -> int:
    total = 0
    for path in glob.glob(log_path + "*"):
        try:
            total += os.stat(path).st_size
        except FileNotFoundError:
            pass
    return total


def flood(http, api, megabytes: int) -> None:
    script = f"yes $(head -c 1000 /dev/zero | tr '\\0' y) | head -c {megabytes * 1_000_000}"
    job_id = submit(http, ["sh", "-c", script], timeout_seconds=600, cpu_milli=1000)
    job = wait_running(http, job_id)
    found = containers_of(api, job["attempts"][0])
    cid = found[0]["Id"]
    info = api.inspect_container(cid)
    log_path, peak, samples = info["LogPath"], 0, 0
    finished_at = None
    while True:
        try:
            info = api.inspect_container(cid)
        except Exception:  # noqa: BLE001 - removed: the flood is over
            break
        if info["State"]["Status"] in ("exited", "dead") and finished_at is None:
            finished_at = info["State"]["FinishedAt"]
        size = engine_log_bytes(log_path)
        if size > peak:
            size = min(size, engine_log_bytes(log_path))  # a sample mid-rotation may count a renamed file twice
        peak = max(peak, size)
        samples += 1
        time.sleep(0.005)
    job = wait_end(http, job_id)
    delay = ""
    if finished_at:
        exited = datetime.fromisoformat(finished_at[:26].rstrip("Z") + "+00:00")
        ended = datetime.fromisoformat(job["attempts"][0]["ended_at"].replace("Z", "+00:00"))
        delay = f", container exit → job end {(ended - exited).total_seconds() * 1000:.0f} ms"
    attempt = job["attempts"][0]
    print(f"2. flood of {megabytes} MB in 1 KB lines: {job['state']} (exit {job['exit_code']}){delay}")
    print(
        f"   peak engine log {peak:,} bytes over {samples} samples (bound 67,108,864); "
        f"stored {attempt['log_bytes']:,} bytes, log_truncated {attempt['log_truncated']}"
    )


def cancel_to_gone(http, api, n: int) -> None:
    times = []
    for _ in range(n):
        job_id = submit(http, ["sleep", "120"], timeout_seconds=600)
        attempt = wait_running(http, job_id)["attempts"][0]
        t0 = time.monotonic()
        http.post(f"jobs/{job_id}/cancel").raise_for_status()
        while containers_of(api, attempt):
            time.sleep(0.005)
        times.append(time.monotonic() - t0)
        wait_end(http, job_id)
    print(
        f"3. cancel → container gone, {n} jobs of `sleep 120` (no trap): "
        f"p50 {pct(times, 50) * 1000:.0f} ms, p99 {pct(times, 99) * 1000:.0f} ms, max {max(times) * 1000:.0f} ms"
    )


def disk_stop_latency(runs: int) -> None:
    from bench.hostile_disk import measure

    r = measure(runs=runs)
    print(
        f"4. crossing disk_bytes -> container stopped: p50 {r['p50'] * 1000:.0f} ms, "
        f"p99 {r['p99'] * 1000:.0f} ms over {r['runs']} runs"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cancels", type=int, default=20)
    parser.add_argument("--flood-mb", type=int, default=300)
    parser.add_argument("--disk-runs", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="euler-bench-") as tmp:
        platform, http, _key = boot(Path(tmp))
        try:
            import docker

            api = docker.from_env().api
            lost_below_cap(http)
            flood(http, api, args.flood_mb)
            cancel_to_gone(http, api, args.cancels)
            disk_stop_latency(args.disk_runs)
        finally:
            platform.stop()


if __name__ == "__main__":
    main()
