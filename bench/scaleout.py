"""Scale-out, full size: 1,000 jobs over 20 simulated nodes, two web processes, two workers and beat.

    DATABASE_URL=postgres://root@127.0.0.1:5432/test REDIS_URL=redis://127.0.0.1:6379/0 \
        .venv/bin/python bench/scaleout.py [--jobs 1000] [--nodes 20]

Runs tests/e2e/test_scaleout.py (the same harness and ledger checks as `make test`, sized by
EULER_SCALEOUT_JOBS / EULER_SCALEOUT_NODES) and prints throughput and the checks: double-booked
instants (CPU, memory or a GPU UUID held twice on a node), jobs not ended exactly once. PostgreSQL only.
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
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--nodes", type=int, default=20)
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        print("bench/scaleout.py needs DATABASE_URL=postgres://… (the topology is PostgreSQL + Redis)")
        return 2
    env = {**os.environ, "EULER_SCALEOUT_JOBS": str(args.jobs), "EULER_SCALEOUT_NODES": str(args.nodes)}
    argv = [sys.executable, "-m", "pytest", "tests/e2e/test_scaleout.py", "-s", "-p", "no:randomly",
            "-k", "never_double_book", "--timeout", str(600 + args.jobs), "-o", "log_cli=false"]  # fmt: skip
    started = time.monotonic()
    proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True)
    for line in proc.stdout.splitlines():
        if line.startswith("scale-out:"):
            print(line)
    print(proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr[-2000:])
    print(f"wall time {time.monotonic() - started:.0f} s")
    if proc.returncode:
        print(proc.stdout[-6000:])
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
