"""The commit of one small write transaction in SQLite, by journal mode and synchronous level (`make up`'s database).

    .venv/bin/python bench/sqlite_commit.py [--commits 400] [--dir DIR] [--connections 20]

On a file in DIR (default: a temporary directory under the data dir's filesystem, `./var`, created if missing), per
mode: BEGIN IMMEDIATE, one INSERT, COMMIT, `--commits` times; prints the median and p90 of each. The modes: the
rollback journal (SQLite's default, what `make up` used before) and write-ahead logging (what `migrate` now sets,
euler/apps.py), each with `synchronous=FULL` (every commit synced: config/settings.py keeps this) and `NORMAL`
(WAL's commits not synced, for comparison only).

Then the cost of a new connection, which is why a Celery worker now keeps its own (euler/celery.py): the project's
schema migrated into a fresh file, `--connections` times a new Django connection and the scheduling pass's first
read on it (`jobs.scheduling.loading.queued_order`: SQLite reads the whole schema at a connection's first
statement), beside the same read again on that connection.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
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


def first_statement_ms(data_dir: Path, connections: int) -> tuple[list[float], list[float]]:
    """(first read on a new connection, the same read again) in ms, on the project's schema in `data_dir`."""
    import os

    os.environ["EULER_DATA_DIR"] = str(data_dir)
    os.environ.pop("DATABASE_URL", None)  # the embedded default: SQLite in the data dir
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from jobs.scheduling.loading import queued_order

    call_command("migrate", verbosity=0)
    first, again = [], []
    for _ in range(connections):
        connection.close()
        t0 = time.perf_counter()
        queued_order()
        t1 = time.perf_counter()
        queued_order()
        first.append((t1 - t0) * 1000)
        again.append((time.perf_counter() - t1) * 1000)
    connection.close()
    return first, again


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=400)
    parser.add_argument("--dir", default="var")
    parser.add_argument("--connections", type=int, default=20)
    args = parser.parse_args()
    Path(args.dir).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="sqlite-commit-") as tmp:
        print(f"one-row write transactions on {tmp}, {args.commits} each")
        for journal, synchronous in MODES:
            took = sorted(commit_ms(Path(tmp) / f"{journal}-{synchronous}.sqlite3", journal, synchronous, args.commits))
            p90 = took[int(0.9 * (len(took) - 1))]
            print(f"  journal {journal:6} synchronous {synchronous:6} median {statistics.median(took):6.3f} ms"
                  f"   p90 {p90:6.3f} ms")  # fmt: skip
        first, again = first_statement_ms(Path(tmp) / "data", args.connections)
        print(f"a new connection's first read (the pass's queued_order) on the migrated schema, {args.connections} each:"
              f" median {statistics.median(first):6.3f} ms; the same read again {statistics.median(again):6.3f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
