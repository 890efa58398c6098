"""Long fuzz run: schemathesis over every /api/schema/ operation, many cases each; prints cases and failures.

    .venv/bin/python bench/fuzz.py [--examples 200] [--seed 1234]

Runs tests/fuzz in a throw-away test database (PostgreSQL when DATABASE_URL is set, else SQLite),
with EULER_FUZZ_EXAMPLES cases per operation instead of the few `make test` uses. Without --seed,
generation is random each run (with it, a run can be replayed). Prints operations, cases, the
status codes seen and every failure (5xx, schema mismatch); exits non-zero when any failed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=200, help="cases per operation")
    parser.add_argument("--seed", type=int, default=None, help="replay a run (default: random)")
    args = parser.parse_args()
    env = {**os.environ, "EULER_FUZZ_EXAMPLES": str(args.examples), "EULER_FUZZ_RANDOM": "1"}
    if args.seed is not None:
        env["EULER_FUZZ_SEED"] = str(args.seed)
    started = time.monotonic()
    cmd = [sys.executable, "-m", "pytest", "tests/fuzz", "-s", "-p", "no:warnings", "-o", "timeout=3600"]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    elapsed = time.monotonic() - started
    lines = proc.stdout.splitlines()
    for line in lines:
        if line.startswith("fuzz") or line.startswith("E  ") or " passed" in line or " failed" in line:
            print(line)
    if proc.returncode not in (0, 1):
        print(proc.stdout[-4000:], proc.stderr[-4000:])
    print(
        f"wall: {elapsed:.1f} s, {args.examples} examples per operation, database: "
        f"{'PostgreSQL' if os.environ.get('DATABASE_URL') else 'SQLite'}"
    )
    return proc.returncode


if __name__ == "__main__":
    raise SystemExit(main())
