"""Chaos, full size: 100 short jobs on 2 real agents while agents, worker, web and Redis are killed -9.

    .venv/bin/python bench/chaos.py [--jobs 100] [--seed N]
    DATABASE_URL=postgres://root@127.0.0.1:5432/test REDIS_URL=redis://127.0.0.1:6379/0 .venv/bin/python bench/chaos.py

Runs tests/e2e/test_chaos.py (the same harness and checks as `make test`, sized by EULER_CHAOS_JOBS)
and prints its figures: jobs, faults injected, lost, double runs, missing lines. A fault every third
job: about 33 kills for 100 jobs. Needs the local Docker engine and the `euler-test/busybox` image.
The same faults across arrays with outputs, dependency chains and a schedule: bench/chaos_features.py.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0, help="replay a run (0: a fresh seed, printed)")
    args = parser.parse_args()
    env = {**os.environ, "EULER_CHAOS_JOBS": str(args.jobs)}
    if args.seed:
        env["EULER_CHAOS_SEED"] = str(args.seed)
    argv = [sys.executable, "-m", "pytest", "tests/e2e/test_chaos.py", "-s", "-p", "no:randomly",
            "--timeout", str(600 + 10 * args.jobs), "-o", "log_cli=false"]  # fmt: skip
    started = time.monotonic()
    proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True)
    for line in proc.stdout.splitlines():
        if line.startswith("chaos:") and ("jobs" in line or "seed" in line):
            print(line)
    print(proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr[-2000:])
    print(f"wall time {time.monotonic() - started:.0f} s")
    if proc.returncode:
        print(proc.stdout[-6000:])
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
