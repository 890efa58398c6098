"""A hot path's query through the ORM each time against the same query compiled once (euler/prepared.py, writes:
euler/writes.py), in one process, on a throw-away database.

    .venv/bin/python bench/prepared.py [--rounds 2000]

SQLite (a temporary file) unless DATABASE_URL names PostgreSQL (then a throw-away `euler_bench_prepared_<pid>`).
Each pair runs alternately, a call each, so that drift hits both alike; prints the median per call. The queries are
the project's own: a project's held resources (the scheduling pass), a report's fenced attempt with its job, a job's
whole read (GET /api/v1/jobs/{id} and the blocking read's answer), and a metering mark's conditional UPDATE.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def timed(fn, rounds: int, pairs: dict) -> None:
    """Median seconds per call of each of `pairs` (label -> fn), alternating a call each."""
    samples: dict[str, list[float]] = {label: [] for label in pairs}
    for _ in range(rounds):
        for label, call in pairs.items():
            t = time.perf_counter()
            call()
            samples[label].append(time.perf_counter() - t)
    fn(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2000)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    tmp = tempfile.mkdtemp(prefix="euler-bench-prepared-")
    os.environ.setdefault("EULER_DATA_DIR", tmp)
    import django

    django.setup()
    from django.db import connection

    if connection.vendor == "sqlite":
        connection.settings_dict["TEST"]["NAME"] = str(Path(tmp) / "bench.sqlite3")
    else:
        connection.settings_dict["TEST"]["NAME"] = f"euler_bench_prepared_{os.getpid()}"
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False)
    try:
        run(args.rounds)
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


def run(rounds: int) -> None:
    from django.db import connection, transaction
    from django.db.models import Sum
    from django.utils import timezone

    from euler import writes
    from jobs import fencing, selectors
    from jobs.models import Attempt, Job, JobEvent
    from jobs.scheduling import loading
    from jobs.states import ATTEMPT_ACTIVE
    from nodes.models import Node
    from quotas.services import project_create
    from tests.jobs.reference import job_read_by_orm

    project = project_create(name="bench")
    node = Node.objects.create(name="n1", trust="platform", approval="approved", online=True, cpu_milli=4000,
                               memory_bytes=8 << 30)  # fmt: skip
    job = Job.objects.create(project=project, name="j", image="alpine:3.20", command=["true"], cpu_milli=500,
                             memory_bytes=64 << 20, timeout_seconds=60, state="running",
                             queued_at=timezone.now())  # fmt: skip
    attempt = Attempt.objects.create(job=job, number=1, node=node, node_name=node.name, cpu_milli=500,
                                     memory_bytes=64 << 20, state="running", started_at=timezone.now())  # fmt: skip
    mark = timezone.now()
    Attempt.objects.filter(pk=attempt.pk).update(metered_until=mark)
    for to in ("queued", "assigned", "running"):
        JobEvent.objects.create(job=job, attempt=attempt, from_state="", to_state=to)

    def held_orm():
        return list(
            Attempt.objects.filter(state__in=ATTEMPT_ACTIVE, job__project_id__in={project.pk})
            .values("job__project_id")
            .annotate(cpu=Sum("cpu_milli"), mem=Sum("memory_bytes"), gpus=Sum("job__gpu_count"))
            .values_list("job__project_id", "cpu", "mem", "gpus")
        )

    def fenced_orm():
        return Attempt.objects.select_related("job").defer("job__env").filter(pk=attempt.pk).first()

    def job_orm():
        return job_read_by_orm(project, job.pk)

    def mark_orm():
        return Attempt.objects.filter(pk=attempt.pk, metered_until=mark).update(metered_until=mark)

    pairs = [
        ("a project's held resources (the pass)", held_orm, lambda: loading._HELD({project.pk})),
        ("a report's fenced attempt and job", fenced_orm, lambda: fencing._WITH_JOB.first(attempt.pk)),
        ("a job's whole read (4 statements)", job_orm, lambda: selectors.job_get(project=project, job_id=job.pk)),
        ("a conditional UPDATE (metering mark)", mark_orm,
         lambda: writes.update_where(Attempt, attempt.pk, {"metered_until": mark}, metered_until=mark)),
    ]  # fmt: skip
    print(f"{connection.vendor}, {rounds} rounds, one call of each per round, alternating (median per call)")
    with transaction.atomic():
        for label, orm, compiled in pairs:
            assert repr(orm()) == repr(compiled()), label  # the same answer before it is timed

            def show(samples, label=label):
                a, b = (statistics.median(v) * 1000 for v in samples.values())
                print(f"  {label:<40} ORM {a:6.3f} ms   compiled once {b:6.3f} ms   ({a / b:4.1f}×)")

            timed(show, rounds, {"orm": orm, "compiled": compiled})


if __name__ == "__main__":
    main()
