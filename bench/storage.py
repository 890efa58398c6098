"""Database bytes per 1,000 hello jobs and per MiB of text-heavy log, with log chunks hot (as stored at ingest)
and after compaction (jobs.logstore: one zlib row per ended attempt). PostgreSQL only; own scratch database.

    DATABASE_URL=postgres://root@127.0.0.1:5432/test REDIS_URL=redis://127.0.0.1:6379/0 \
        .venv/bin/python bench/storage.py [--jobs 1000] [--log-mib 16]

Sizes are pg_total_relation_size (heap, TOAST, indexes) of the jobs tables after VACUUM FULL, so pages freed by
compaction are not counted (PostgreSQL reuses them for new chunks). A hello job is stored as the real path
stores it: the job, 4 job events (queued, assigned, running, succeeded), 1 attempt, 1 chunk "hello from Euler\\n".
"""

from __future__ import annotations

import argparse
import os
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

MIB = 1024 * 1024
TABLES = ("jobs_job", "jobs_attempt", "jobs_jobevent", "jobs_logchunk", "jobs_logarchive")
LOG_TABLES = ("jobs_logchunk", "jobs_logarchive")


def text_log(rng: random.Random, size: int) -> str:
    """Text-heavy output as training and build jobs print it: timestamps, levels, figures, ids, warnings."""
    modules = ["trainer.py:212", "data/loader.py:88", "model/attn.py:301", "utils/ckpt.py:45", "dist.py:19"]
    lines, total, step = [], 0, 0
    while total < size:
        step += 1
        kind = rng.random()
        ts = f"2026-11-30 10:{step // 3600 % 60:02d}:{step % 60:02d},{rng.randint(0, 999):03d}"
        if kind < 0.7:
            line = (
                f"{ts} INFO  {rng.choice(modules)}] epoch {step // 500} step {step}/50000 loss={rng.uniform(0.1, 3):.4f} "
                f"lr={rng.uniform(1e-5, 3e-4):.2e} throughput={rng.uniform(800, 2000):.1f} samples/s "
                f"gpu_mem={rng.uniform(20, 79):.1f}GiB\n"
            )
        elif kind < 0.85:
            line = f"{ts} DEBUG {rng.choice(modules)}] fetched shard {rng.getrandbits(64):016x} in {rng.randint(1, 900)} ms\n"
        elif kind < 0.95:
            line = (
                f"{ts} WARNING {rng.choice(modules)}] gradient norm {rng.uniform(5, 50):.2f} above clip 5.0; "
                f"clipped (request {rng.getrandbits(96):024x})\n"
            )
        else:
            line = (
                f'Traceback (most recent call last):\n  File "/app/{rng.choice(modules).split(":")[0]}", line '
                f"{rng.randint(1, 400)}, in forward\n    out = self.block(x)\nRuntimeError: CUDA out of memory. "
                f"Tried to allocate {rng.randint(1, 900)}.00 MiB\n"
            )
        lines.append(line)
        total += len(line)
    return "".join(lines)[:size]


def sizes(cursor, tables) -> int:
    cursor.execute("VACUUM FULL " + ", ".join(tables))
    cursor.execute("SELECT " + " + ".join(f"pg_total_relation_size('{t}')" for t in tables))
    return int(cursor.fetchone()[0])


def make_jobs(project, n: int, now, *, log: str | None = None, chunk_bytes: int = 0) -> list[int]:
    from django.db import transaction

    with transaction.atomic():
        return _insert(project, n, now, log=log, chunk_bytes=chunk_bytes)


def _insert(project, n: int, now, *, log: str | None, chunk_bytes: int) -> list[int]:
    from django.db.models import Max

    from jobs.models import Attempt, Job, JobEvent, LogChunk

    # Explicit ids, so that each job names its attempt when inserted (FKs are deferred to commit): no UPDATE,
    # hence no dead row versions that a busy shared server would keep counting.
    first_job = (Job.objects.aggregate(m=Max("pk"))["m"] or 0) + 1
    first_attempt = (Attempt.objects.aggregate(m=Max("pk"))["m"] or 0) + 1
    jobs = Job.objects.bulk_create(
        [
            Job(
                pk=first_job + i,
                current_attempt_id=first_attempt + i,
                project=project,
                name="hello",
                image="alpine:3.20",
                command=["echo", "hello from Euler"],
                cpu_milli=500,
                memory_bytes=64 << 20,
                timeout_seconds=60,
                state="succeeded",
                exit_code=0,
                reason="exited",
                queued_at=now,
                ended_at=now,
            )
            for i in range(n)
        ]
    )
    attempts = Attempt.objects.bulk_create(
        [
            Attempt(
                pk=first_attempt + i,
                job=job,
                number=1,
                node_name="bench-node",
                cpu_milli=500,
                memory_bytes=64 << 20,
                state="succeeded",
                exit_code=0,
                reason="exited",
                container_id="c" * 64,
                started_at=now,
                ended_at=now,
                delivered_at=now,
                metered_until=now,
            )
            for i, job in enumerate(jobs)
        ]
    )
    events, chunks = [], []
    for job, attempt in zip(jobs, attempts, strict=True):
        events.append(JobEvent(job=job, to_state="queued", message="submitted"))
        events.append(JobEvent(job=job, attempt=attempt, from_state="queued", to_state="assigned"))
        events.append(JobEvent(job=job, attempt=attempt, from_state="assigned", to_state="running"))
        events.append(JobEvent(job=job, attempt=attempt, from_state="running", to_state="succeeded", reason="exited"))
        text = log if log is not None else "hello from Euler\n"
        step = chunk_bytes or len(text)
        for seq, at in enumerate(range(0, len(text), step)):
            chunks.append(LogChunk(attempt=attempt, seq=seq, offset=at, stream="stdout", data=text[at : at + step]))
    JobEvent.objects.bulk_create(events)
    LogChunk.objects.bulk_create(chunks, batch_size=2000)
    return [a.pk for a in attempts]


def drop_dead_chunks(cursor) -> None:
    """After compaction the hot table holds only dead row versions; VACUUM FULL drops them on a quiet server,
    but not while another session's snapshot (other work on a shared server) may still see them."""
    from jobs.models import LogChunk

    assert not LogChunk.objects.exists(), "compaction left live chunks"
    cursor.execute("TRUNCATE jobs_logchunk")


def clear(cursor) -> None:
    cursor.execute("TRUNCATE " + ", ".join(TABLES) + " CASCADE")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--log-mib", type=int, default=16, help="MiB of text log per chunk size measured")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from django.db import connection
    from django.utils import timezone

    if connection.vendor != "postgresql":
        sys.exit("bench/storage.py measures PostgreSQL: set DATABASE_URL=postgres://…")
    connection.settings_dict["TEST"]["NAME"] = "euler_bench_storage"
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False)
    try:
        from jobs import logstore
        from quotas.services import project_create

        project = project_create(name="bench")
        now = timezone.now()
        later = now + timezone.timedelta(days=1)
        with connection.cursor() as cursor:
            empty = sizes(cursor, TABLES)
            make_jobs(project, args.jobs, now)
            hot = sizes(cursor, TABLES) - empty
            logstore.compact_ended(now=later)
            drop_dead_chunks(cursor)
            compacted = sizes(cursor, TABLES) - empty
            print(f"{args.jobs} hello jobs: {hot / 1e6:.3f} MB hot, {compacted / 1e6:.3f} MB after compaction")
            print(f"  per 1,000 jobs: {hot / args.jobs:.0f} kB hot -> {compacted / args.jobs:.0f} kB compacted")
            rng = random.Random(7)
            per_attempt = 1 * MIB
            # 256 B: a job printing a line every flush (200 ms); 4 KiB and 64 KiB (the protocol's largest): busy jobs.
            for chunk_bytes, mib in ((256, min(2, args.log_mib)), (4096, args.log_mib), (65536, args.log_mib)):
                clear(cursor)
                base = sizes(cursor, LOG_TABLES)
                for _ in range(mib):  # one attempt per MiB, a different log each time
                    make_jobs(project, 1, now, log=text_log(rng, per_attempt), chunk_bytes=chunk_bytes)
                hot = sizes(cursor, LOG_TABLES) - base
                logstore.compact_ended(now=later)
                drop_dead_chunks(cursor)
                compacted = sizes(cursor, LOG_TABLES) - base
                raw = per_attempt * mib  # the generated text is ASCII: one byte per character
                print(
                    f"text log, {chunk_bytes} B chunks, {mib} MiB: bytes stored per byte of log "
                    f"{hot / raw:.3f} hot -> {compacted / raw:.3f} compacted "
                    f"({hot / mib / 1024:.0f} -> {compacted / mib / 1024:.0f} KiB per MiB)"
                )
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


if __name__ == "__main__":
    main()
