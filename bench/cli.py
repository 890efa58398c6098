"""`euler run` of the hello job versus the same job over raw HTTP, and `euler --version` alone.

    .venv/bin/python bench/cli.py [--runs 20]

Boots the real platform like bench/job_latency.py (uvicorn web, Celery worker and beat, one `./euler-node`
agent on the local Docker engine, a throw-away SQLite database unless DATABASE_URL names one), then, in
turns so that drift hits both alike:
- raw: from this process, with an httpx client already imported and connected, `POST /api/v1/jobs`, then
  `GET /api/v1/jobs/{id}/logs?follow=1` read to its end, then `GET /api/v1/jobs/{id}` (the exit code);
- cli: `.venv/bin/euler run -q IMAGE -- echo hello from Euler` as a subprocess, start-up included, until it exits.
Prints the median (and p90) of each over `--runs` runs, the CLI's added time, and the medians of
`euler --version` and `python -c pass` (the interpreter's own start-up) as subprocesses.

On a busy machine the job's own time (queue, container start, end report) varies by more than the CLI
costs, so each run is also split at the server's records (same clock): client side = (job created −
start) + (end seen − job ended), i.e. the whole run minus what the server and the node spent on the job;
and the CPU time (user + sys) each subprocess used.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
EULER = Path(sys.executable).parent / "euler"
IMAGE = "euler-test/busybox"
HELLO = ["echo", "hello from Euler"]


def server_span(http, job_id: int) -> float:
    """Seconds from the job's creation to its end, from the server's records."""
    from datetime import datetime

    job = http.get(f"jobs/{job_id}").json()
    created = datetime.fromisoformat(job["created_at"].replace("Z", "+00:00"))
    ended = datetime.fromisoformat(job["ended_at"].replace("Z", "+00:00"))
    return (ended - created).total_seconds()


def raw(http) -> tuple[float, int]:
    t0 = time.perf_counter()
    r = http.post("jobs", json={"name": "hello", "image": IMAGE, "command": HELLO, "cpu_milli": 100,
                                "memory_bytes": 32 << 20, "timeout_seconds": 60})  # fmt: skip
    r.raise_for_status()
    job_id = r.json()["id"]
    with http.stream("GET", f"jobs/{job_id}/logs", params={"follow": "1"}) as response:
        text = "".join(response.iter_text())
    job = http.get(f"jobs/{job_id}").json()
    elapsed = time.perf_counter() - t0
    if text != "hello from Euler\n" or job["state"] != "succeeded":
        raise SystemExit(f"raw: job {job_id} {job['state']}, log {text!r}")
    return elapsed, job_id


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


CPU: dict[str, list[float]] = {"euler run": [], "euler --version": [], "python -c pass": []}


def cli(env: dict, http) -> tuple[float, int]:
    argv = [str(EULER), "run", "-q", "--cpu", "100m", "--memory", "32Mi", "--timeout", "60", IMAGE, "--", *HELLO]
    cpu0, t0 = children_cpu(), time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    elapsed = time.perf_counter() - t0
    CPU["euler run"].append(children_cpu() - cpu0)
    if done.returncode != 0 or done.stdout != "hello from Euler\n":
        raise SystemExit(f"cli: exit {done.returncode}, stdout {done.stdout!r}, stderr {done.stderr!r}")
    job_id = http.get("jobs", params={"page_size": 1}).json()["results"][0]["id"]  # the newest: this one
    return elapsed, job_id


def startup(label: str, argv: list[str], runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        cpu0, t0 = children_cpu(), time.perf_counter()
        subprocess.run(argv, capture_output=True, check=True)
        times.append(time.perf_counter() - t0)
        CPU[label].append(children_cpu() - cpu0)
    return times


def p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.9 * len(ordered)) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=2)
    args = parser.parse_args()
    if not EULER.exists():
        raise SystemExit(f"{EULER} is missing: pip install -e ./client")
    from job_latency import boot

    with tempfile.TemporaryDirectory(prefix="euler-bench-") as tmp:
        platform, http, key = boot(Path(tmp))
        env = {"PATH": os.environ.get("PATH", ""), "HOME": tmp, "EULER_URL": platform.url, "EULER_API_KEY": key}
        try:
            raws, clis, raw_sides, cli_sides = [], [], [], []
            for i in range(args.warmup + args.runs):
                (r, r_id), (c, c_id) = raw(http), cli(env, http)
                if i >= args.warmup:
                    raws.append(r)
                    clis.append(c)
                    raw_sides.append(r - server_span(http, r_id))
                    cli_sides.append(c - server_span(http, c_id))
        finally:
            platform.stop()
    version = startup("euler --version", [str(EULER), "--version"], args.runs)
    bare = startup("python -c pass", [sys.executable, "-c", "pass"], args.runs)
    load = os.getloadavg()[0]
    print(f"euler run of the hello job vs raw HTTP, {args.runs} runs each, alternating (load average {load:.1f})")
    for label, values in (("raw HTTP (in process)", raws), ("euler run (subprocess)", clis)):
        print(f"  {label:<24} median {statistics.median(values) * 1000:6.0f} ms   p90 {p90(values) * 1000:6.0f} ms")
    added = statistics.median(clis) - statistics.median(raws)
    print(f"  euler run adds           {added * 1000:6.0f} ms (median vs median; goal ≤ 150 ms)")
    for label, values in (("raw HTTP, client side", raw_sides), ("euler run, client side", cli_sides)):
        print(f"  {label:<24} median {statistics.median(values) * 1000:6.0f} ms   p90 {p90(values) * 1000:6.0f} ms")
    side = statistics.median(cli_sides) - statistics.median(raw_sides)
    print(f"  euler run adds, client side only {side * 1000:6.0f} ms (without the job's own time)")
    print(f"  euler --version          median {statistics.median(version) * 1000:6.0f} ms")
    print(f"  python -c pass           median {statistics.median(bare) * 1000:6.0f} ms (interpreter start-up)")
    print("  CPU time of the process (user + sys; less sensitive to other load than wall time):")
    for label, values in CPU.items():
        print(f"    {label:<22} median {statistics.median(values) * 1000:6.0f} ms")


if __name__ == "__main__":
    main()
