"""runc against gVisor (runsc): the same jobs through Euler and as a bare `docker run --runtime=…` of the same
container, the bare run being the limit Euler cannot beat.

    .venv/bin/python bench/runtimes.py [--hello 20] [--heavy 5]

Starts the real platform (web, worker, beat, one platform `./euler-node` on the local engine, as
bench/job_latency.py does). Jobs run with network "none" (the runsc entry scripts/register-runsc.sh makes is
--network=none); the runc ones as a platform node runs them by default, the runsc ones with `isolation:
"sandbox"`. Per runtime and job: submit → running (hello), and the container's own run (started → ended, as the
server recorded it) for a CPU-bound and a syscall-heavy job; beside each, the wall time of a bare `docker run
--rm --network none --runtime=R` of the same image and command (create, start, wait, remove).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from job_latency import IMAGE, boot, pct, submit  # noqa: E402

JOBS = {
    "hello": ["echo", "hi"],
    "cpu": ["sh", "-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done"],
    "syscalls": ["dd", "if=/dev/zero", "of=/dev/null", "bs=1", "count=200000"],
}


def bare(runtime: str, command: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(
        ["docker", "run", "--rm", "--network", "none", f"--runtime={runtime}", "--init", IMAGE, *command],
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - t0


def through_euler(platform, http, runtime: str, command: list[str]) -> tuple[float, float]:
    """(submit → running, the container's run: started → ended) of one job, in seconds."""
    from jobs.models import Attempt, Job

    over = {"network": "none", "cpu_milli": 1000, "memory_bytes": 256 << 20}
    if runtime == "runsc":
        over["isolation"] = "sandbox"
    t0 = time.time()
    job_id = submit(http, command, **over)
    job = platform.wait_for(
        lambda: Job.objects.filter(pk=job_id, ended_at__isnull=False).first(), f"job {job_id}", timeout=120, every=0.02
    )
    attempt = Attempt.objects.filter(job_id=job_id).order_by("number").first()
    if job.state != "succeeded" or attempt.runtime != runtime:
        raise SystemExit(f"job {job_id} ended {job.state} ({job.reason}) under {attempt.runtime!r}")
    return attempt.started_at.timestamp() - t0, (attempt.ended_at - attempt.started_at).total_seconds()


def ms(values: list[float]) -> str:
    return f"p50 {pct(values, 50) * 1000:6.0f} ms  p99 {pct(values, 99) * 1000:6.0f} ms  mean {statistics.mean(values) * 1000:6.0f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hello", type=int, default=20)
    parser.add_argument("--heavy", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="euler-bench-") as tmp:
        platform, http, _ = boot(Path(tmp))
        try:
            for runtime in ("runc", "runsc"):
                through_euler(platform, http, runtime, JOBS["hello"])  # warm-up
                bare(runtime, JOBS["hello"])
            print("runtimes: runc vs runsc (gVisor, --network=none), one idle platform node, network none jobs")
            for name, command in JOBS.items():
                n = args.hello if name == "hello" else args.heavy
                for runtime in ("runc", "runsc"):
                    runs = [through_euler(platform, http, runtime, command) for _ in range(n)]
                    walls = [bare(runtime, command) for _ in range(n)]
                    if name == "hello":
                        print(f"  {name:<9}{runtime:<6} submit → running  {ms([r[0] for r in runs])}")
                    else:
                        print(f"  {name:<9}{runtime:<6} container run     {ms([r[1] for r in runs])}")
                    print(f"  {'':<15} bare docker run    {ms(walls)}")
        finally:
            platform.stop()


if __name__ == "__main__":
    main()
