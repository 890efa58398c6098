"""The commit of one small write transaction in SQLite, by journal mode and synchronous level (`make up`'s database).

    .venv/bin/python bench/sqlite_commit.py [--commits 400] [--dir DIR]

On a file in DIR (default: a temporary directory under the data dir's filesystem, `./var`, created if missing), per
mode: BEGIN IMMEDIATE, one INSERT, COMMIT, `--commits` times; prints the median and p90 of each. The modes: the
rollback journal (SQLite's default, what `make up` used before) and write-ahead logging (what `migrate` now sets,
euler/apps.py), each with `synchronous=FULL` (every commit synced: config/settings.py keeps this) and `NORMAL`
(WAL's commits not synced, for comparison only).
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

MODES = [("delete", "FULL"), ("delete", "NORMAL"), ("wal", "FULL"), ("wal", "NORMAL")]


def commit_ms(path: Path, journal: str, synchronous: str, commits: int) -> list[float]:
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute(f"PRAGMA journal_mode={journal}")
        db.execute(f"PRAGMA synchronous={synchronous}")
        db.execute("CREATE TABLE IF NOT EXISTS t (x INTEGER)")
        took = []
        for i in range(commits):
            t0 = time.perf_counter()
            db.execute("BEGIN IMMEDIATE")
            db.execute("INSERT INTO t VALUES (?)", (i,))
            db.execute("COMMIT")
            took.append((time.perf_counter() - t0) * 1000)
        return took
    finally:
        db.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=400)
    parser.add_argument("--dir", default="var")
    args = parser.parse_args()
    Path(args.dir).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="sqlite-commit-") as tmp:
        print(f"one-row write transactions on {tmp}, {args.commits} each")
        for journal, synchronous in MODES:
            took = sorted(commit_ms(Path(tmp) / f"{journal}-{synchronous}.sqlite3", journal, synchronous, args.commits))
            p90 = took[int(0.9 * (len(took) - 1))]
            print(f"  journal {journal:6} synchronous {synchronous:6} median {statistics.median(took):6.3f} ms"
                  f"   p90 {p90:6.3f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
