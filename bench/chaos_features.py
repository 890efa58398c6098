"""Chaos across the new features: kill -9 of an agent, a worker, the web process and Redis while an array whose
tasks write outputs runs, dependency chains settle and a per-minute schedule ticks.

    DATABASE_URL=postgres://root@127.0.0.1:5432/test REDIS_URL=redis://127.0.0.1:6379/0 \
        .venv/bin/python bench/chaos_features.py [--tasks 200] [--parallelism 10] [--seed N] [--min-chaos 90]

The real platform (tests/e2e/harness.py: web, two workers, beat, its own Redis) on a scratch PostgreSQL database
(created and dropped), two real `./euler-node` agents on the local Docker engine (image `euler-test/busybox`).
Submitted before the first fault: an array of --tasks tasks, each writing /out/result.txt (its own text); the
chains A → B (succeeded) → C (ended), F (exits 1) → G (succeeded) → H (ended), F → E (ended), and Z (succeeded)
on the whole array, each job writing its own /out/result.txt; a `* * * * *` schedule (overlap allow). Then a
seeded RNG (`--seed` replays it) kills -9 one of agent 1, agent 2, worker-control, worker, web, Redis every
2-6 s, each at least once, and brings it back after 0.3-2 s, until the array ended and --min-chaos seconds passed.

Printed at the end, from the database, the output store on disk and Docker's own event log:
  outputs   every succeeded job's file stored exactly once with its own bytes (lost, double, wrong bytes), no row
            left incomplete after its attempt ended (orphaned), no file in the store that no row names (stray)
  deps      each dependent settled as jobs.workflow's verdict on its parents' end says (run after they ended, or
            cancelled `dependency_failed` without an attempt), and as the chain was meant to
  ticks     every minute boundary of the run has exactly one schedule run (lost, doubled) and one job
  jobs      every job ended exactly once, no two attempts (nor containers) of one job at once
Exit status 1 when any of those is not 0.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

IMAGE = "euler-test/busybox"
SMALL = {"image": IMAGE, "cpu_milli": 20, "memory_bytes": 16 << 20, "gpu_count": 0, "timeout_seconds": 120,
         "max_retries": 3, "retry_on": ["lost"], "outputs": ["/out"]}  # fmt: skip
TERMINAL = {"succeeded", "failed", "cancelled", "lost"}
# (name, exit code, seconds it runs, [(parent, condition)], meant to end as)
CHAINS = [
    ("A", 0, 12, [], "succeeded"),
    ("B", 0, 6, [("A", "succeeded")], "succeeded"),
    ("C", 0, 1, [("B", "ended")], "succeeded"),
    ("F", 1, 4, [], "failed"),
    ("G", 0, 1, [("F", "succeeded")], "cancelled"),
    ("H", 0, 1, [("G", "ended")], "cancelled"),
    ("E", 0, 1, [("F", "ended")], "succeeded"),
    ("Z", 0, 1, [("array", "succeeded")], "succeeded"),
]


def text_of(prefix: str, what: str) -> str:
    return f"chaos {prefix} {what}\n"


def writer(prefix: str, what: str, seconds: str, code: int = 0) -> list[str]:
    """A job that writes its own text to /out/result.txt, runs `seconds`, and exits `code`."""
    return ["sh", "-c", f'mkdir -p /out && echo "chaos {prefix} {what}" > /out/result.txt && sleep {seconds}'
            f" && exit {code}"]  # fmt: skip


class Run:
    def __init__(self, platform, args) -> None:
        from quotas.models import Quota
        from quotas.services import project_create
        from tests.e2e.test_chaos import Chaos

        self.args, self.platform = args, platform
        project = project_create(name="chaos-features")
        Quota.objects.filter(project=project).update(
            max_concurrent_jobs=100_000, cpu_core_seconds=10**12, output_bytes=10**12
        )
        self.chaos = Chaos(platform, project, random.Random(args.seed))
        self.project, self.http, self.rng = project, self.chaos.http, self.chaos.rng
        self.prefix = uuid.uuid4().hex[:6]
        self.ids: dict[str, int] = {}

    def post(self, path: str, body: dict) -> dict:
        r = self.http.post(path, json=body, timeout=60)
        if r.status_code != 201:
            raise SystemExit(f"POST {path}: {r.status_code} {r.text[:500]}")
        return r.json()

    # --- the workload, all submitted before the first fault -------------------------------------------------------
    def submit(self) -> None:
        p = self.prefix
        arr = self.post("jobs", {**SMALL, "name": f"cf{p}-array", "array": {"count": self.args.tasks,
                                 "parallelism": self.args.parallelism},
                                 "command": writer(p, "task $EULER_ARRAY_INDEX", "$((EULER_ARRAY_INDEX % 3))")})  # fmt: skip
        self.array_id = arr["id"]
        for name, code, seconds, parents, _ in CHAINS:
            deps = [{"array": self.array_id, "condition": c} if on == "array" else {"job": self.ids[on], "condition": c}
                    for on, c in parents]  # fmt: skip
            extra = {"max_retries": 0} if code else {}
            job = self.post("jobs", {**SMALL, **extra, "name": f"cf{p}-{name}", "command": writer(p, name, seconds, code),
                                     **({"depends_on": deps} if deps else {})})  # fmt: skip
            self.ids[name] = job["id"]
        sched = self.post("schedules", {"name": f"cf{p}-tick", "cron": "* * * * *", "overlap": "allow", "job": {
            "name": f"cf{p}-tick", "image": IMAGE, "command": ["true"], "cpu_milli": 20, "memory_bytes": 16 << 20,
            "timeout_seconds": 60, "max_retries": 3, "retry_on": ["lost"]}})  # fmt: skip
        self.first_tick = datetime.fromisoformat(sched["next_tick_at"].replace("Z", "+00:00"))

    # --- faults ---------------------------------------------------------------------------------------------------
    def array_ended(self) -> bool:
        from jobs.models import Job

        return not Job.objects.filter(array_id=self.array_id).exclude(state__in=TERMINAL).exists()

    def inject_until_done(self) -> None:
        victims = [f"agent:{n}" for n in self.chaos.nodes] + ["worker-control", "worker", "web", "redis"]
        plan = list(victims)
        self.rng.shuffle(plan)
        started = time.monotonic()
        while plan or not self.array_ended() or time.monotonic() - started < self.args.min_chaos:
            if time.monotonic() - started > self.args.max_chaos:
                print(f"chaos-features: faults stopped after --max-chaos {self.args.max_chaos} s", flush=True)
                break
            time.sleep(self.rng.uniform(2.0, 6.0))
            self.chaos.inject(plan.pop() if plan else self.rng.choice(victims))
        self.chaos_seconds = time.monotonic() - started

    def wait_ended(self, timeout: float) -> list:
        from jobs.models import Job

        jobs = Job.objects.filter(project=self.project).exclude(name=f"cf{self.prefix}-tick")
        self.platform.wait_for(lambda: not jobs.exclude(state__in=TERMINAL).exists(), "every job ends",
                               timeout=timeout, every=1)  # fmt: skip
        return list(jobs)

    def close_schedule(self) -> datetime:
        """Wait until a minute boundary is 20 s past (its run surely recorded), disable the schedule, wait for the
        tick jobs; returns the last boundary the verdict counts."""
        now = datetime.now(UTC)
        last = now.replace(second=0, microsecond=0)
        if now - last < timedelta(seconds=20):
            time.sleep(20 - (now - last).total_seconds())
        r = self.http.patch(f"schedules/cf{self.prefix}-tick", json={"enabled": False}, timeout=60)
        assert r.status_code == 200, r.text
        from jobs.models import Job

        ticks = Job.objects.filter(project=self.project, name=f"cf{self.prefix}-tick")
        self.platform.wait_for(lambda: not ticks.exclude(state__in=TERMINAL).exists(), "tick jobs end", timeout=300)
        return last

    # --- verdicts -------------------------------------------------------------------------------------------------
    def expected_text(self, job) -> str:
        if job.array_id == self.array_id:
            return text_of(self.prefix, f"task {job.array_index}")
        return text_of(self.prefix, job.name.split("-", 1)[1])

    def outputs(self, jobs: list) -> dict:
        from jobs.models import Attempt
        from jobs.outputs.models import OutputFile
        from jobs.states import ATTEMPT_ACTIVE

        root = self.platform.tmp / "data" / "outputs"
        ids = [j.id for j in jobs]
        active = set(Attempt.objects.filter(job_id__in=ids, state__in=ATTEMPT_ACTIVE).values_list("pk", flat=True))
        complete: dict[int, list] = {}
        out = {"lost": [], "double": [], "wrong_bytes": [], "other_attempt": [], "orphaned": [], "stray": []}
        for row in OutputFile.objects.filter(job_id__in=ids):
            if row.complete:
                complete.setdefault(row.job_id, []).append(row)
            elif row.attempt_id not in active:
                out["orphaned"].append(
                    f"job {row.job_id} attempt {row.attempt_id} {row.path} {row.received}/{row.size}"
                )
        for job in jobs:
            got = complete.get(job.id, [])
            if len(got) > 1 or Counter(r.path for r in got).get("out/result.txt", 0) > 1:
                out["double"].append(f"{job.name}: {[(r.attempt_id, r.path) for r in got]}")
            if job.state != "succeeded":
                continue
            mine = [r for r in got if r.path == "out/result.txt"]
            if not mine:
                out["lost"].append(f"{job.name} (attempt {job.current_attempt_id}, truncated: {job.outputs_reason!r})")
                continue
            if any(r.attempt_id != job.current_attempt_id for r in mine):
                out["other_attempt"].append(f"{job.name}: rows of {[r.attempt_id for r in mine]}, "
                                            f"succeeded {job.current_attempt_id}")  # fmt: skip
            try:
                held = (root / mine[0].storage_key).read_text()
            except OSError as exc:
                held = f"<{exc.__class__.__name__}>"
            if held != self.expected_text(job):
                out["wrong_bytes"].append(f"{job.name}: {held!r}")
        keys = set(OutputFile.objects.values_list("storage_key", flat=True))
        if root.exists():
            out["stray"] = [str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()
                            and str(p.relative_to(root)) not in keys]  # fmt: skip
        out["stored"] = sum(len(v) for v in complete.values())
        out["truncated"] = sum(1 for j in jobs if j.outputs_truncated)
        return out

    def deps(self, jobs: list) -> dict:
        from jobs import deps as job_deps
        from jobs import workflow
        from jobs.models import Attempt

        by_name = {j.name.split("-", 1)[1]: j for j in jobs if j.array_id is None}
        array_tasks = [j for j in jobs if j.array_id == self.array_id]
        wrong, not_as_meant = [], []
        for name, _, _, parents, meant in CHAINS:
            job = by_name[name]
            verdicts, ended = [], []
            for on, condition in parents:
                if on == "array":
                    counts = job_deps.counts_of([self.array_id])[self.array_id]
                    verdicts.append(workflow.array_verdict(condition, counts, self.args.tasks))
                    ended.append(max((t.ended_at for t in array_tasks if t.ended_at), default=None))
                else:
                    parent = by_name[on]
                    verdicts.append(workflow.job_verdict(condition, parent.state, parent.reason))
                    ended.append(parent.ended_at)
            attempts = list(Attempt.objects.filter(job=job).order_by("number"))
            if workflow.NEVER in verdicts:
                ok = job.state == "cancelled" and job.reason == workflow.BROKEN and not attempts
                said = "never: cancelled dependency_failed without an attempt"
            elif all(v == workflow.MET for v in verdicts):
                ok = (
                    bool(attempts)
                    and job.reason != workflow.BROKEN
                    and all(e is not None and attempts[0].created_at >= e for e in ended)
                )
                said = "met: ran after its parents ended"
            else:
                ok, said = job.state == "waiting", "pending"
            if parents and not ok:
                wrong.append(f"{name}: {said}, but {job.state}/{job.reason} with {len(attempts)} attempt(s)")
            if job.state != meant:
                not_as_meant.append(f"{name}: {job.state}/{job.reason} (meant {meant})")
        return {"dependents": sum(1 for c in CHAINS if c[3]), "wrong": wrong, "not_as_meant": not_as_meant}

    def ticks(self, last: datetime) -> dict:
        from jobs.models import Job
        from workflows.models import ScheduleRun

        runs = list(ScheduleRun.objects.filter(schedule__project=self.project, schedule__name=f"cf{self.prefix}-tick"))
        counted = [r.tick for r in runs if r.tick <= last]
        expected, t = [], self.first_tick
        while t <= last:
            expected.append(t)
            t += timedelta(minutes=1)
        jobs = Job.objects.filter(project=self.project, name=f"cf{self.prefix}-tick")
        with_job = [r for r in runs if r.job_id]
        return {
            "expected": len(expected),
            "runs": len(counted),
            "lost": sorted(set(expected) - set(counted)),
            "doubled": len(counted) - len(set(counted)) + max(0, jobs.count() - len(with_job)),
            "catch_up": sum(1 for r in runs if r.catch_up),
            "outcomes": dict(Counter(r.outcome for r in runs)),
            "late_s": max(((r.created_at - r.tick).total_seconds() for r in runs), default=0.0),
            "jobs": list(jobs),
        }

    def jobs(self, jobs: list) -> dict:
        from jobs.models import Attempt, JobEvent
        from tests.e2e.test_chaos import overlapping

        ids = [j.id for j in jobs]
        ends = Counter(JobEvent.objects.filter(job_id__in=ids, to_state__in=TERMINAL).values_list("job_id", flat=True))
        by_job: dict[int, list] = {}
        for a in Attempt.objects.filter(job_id__in=ids).order_by("job_id", "number"):
            by_job.setdefault(a.job_id, []).append(a)
        containers = self.chaos.container_runs()
        double = [
            j.name
            for j in jobs
            if overlapping(
                [(a.started_at or a.created_at, a.ended_at) for a in by_job.get(j.id, []) if a.started_at or a.ended_at]
            )
        ]
        double += [f"{j.name} (containers)" for j in jobs if overlapping(containers.get(j.id, []))]
        return {
            "jobs": len(jobs),
            "not_ended_once": [j.name for j in jobs if ends.get(j.id, 0) != 1],
            "double_runs": double,
            "attempts": sum(len(v) for v in by_job.values()),
            "states": dict(Counter(j.state for j in jobs)),
            "retried": dict(
                Counter(f"{a.state}/{a.reason}" for v in by_job.values() for a in v if a.state != "succeeded")
            ),
        }


def report(run: Run, o: dict, d: dict, t: dict, j: dict, took: float) -> int:
    p = print
    p(f"chaos-features: seed {run.args.seed}, array of {run.args.tasks} tasks (parallelism {run.args.parallelism}), "
      f"{len(CHAINS)} chain jobs, a * * * * * schedule; {len(run.chaos.faults)} faults in {run.chaos_seconds:.0f} s "
      f"({dict(Counter(run.chaos.faults))}); wall {took:.0f} s")  # fmt: skip
    p(f"outputs: {o['stored']} complete rows; lost {len(o['lost'])}, double {len(o['double'])}, wrong bytes "
      f"{len(o['wrong_bytes'])}, from another attempt {len(o['other_attempt'])}, orphaned (incomplete after the "
      f"attempt ended) {len(o['orphaned'])}, stray files in the store {len(o['stray'])}; jobs marked truncated "
      f"{o['truncated']}")  # fmt: skip
    p(
        f"deps: {d['dependents']} dependents, settled against their conditions {len(d['wrong'])}; "
        f"chain jobs not as meant {len(d['not_as_meant'])}"
    )
    p(
        f"ticks: {t['expected']} minute boundaries, {t['runs']} runs; lost {len(t['lost'])}, doubled {t['doubled']}, "
        f"catch-up runs {t['catch_up']}, outcomes {t['outcomes']}, latest run {t['late_s']:.1f} s after its tick"
    )
    p(f"jobs: {j['jobs']} (ticks included), {j['attempts']} attempts, states {j['states']}; not ended exactly once "
      f"{len(j['not_ended_once'])}, double runs {len(j['double_runs'])}; attempts that did not succeed "
      f"{j['retried'] or 'none'}")  # fmt: skip
    bad = {
        "outputs lost": o["lost"], "outputs double": o["double"], "wrong bytes": o["wrong_bytes"],
        "other attempt": o["other_attempt"], "orphaned rows": o["orphaned"], "stray files": o["stray"],
        "deps wrong": d["wrong"], "chain not as meant": d["not_as_meant"], "ticks lost": t["lost"],
        "not ended once": j["not_ended_once"], "double runs": j["double_runs"],
    }  # fmt: skip
    failed = 0
    for what, items in bad.items():
        if items:
            failed = 1
            p(f"  {what}: {items[:10]}{' …' if len(items) > 10 else ''}")
    return failed or int(t["doubled"] > 0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--parallelism", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0, help="replay a run (0: a fresh seed, printed)")
    parser.add_argument("--min-chaos", type=float, default=90, help="inject faults at least this long (s)")
    parser.add_argument("--max-chaos", type=float, default=3600, help="and at most this long (s)")
    parser.add_argument("--keep", help="copy the processes' logs here at the end")
    args = parser.parse_args()
    args.seed = args.seed or random.SystemRandom().randrange(1, 1 << 30)

    from tests.e2e.test_chaos import FAST

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("DJANGO_DEBUG", "true")
    import django

    django.setup()
    from django.db import connection

    from tests.e2e.harness import Platform

    if connection.vendor != "postgresql":
        sys.exit("set DATABASE_URL to PostgreSQL")
    print(f"chaos-features: seed {args.seed} (--seed {args.seed} replays it), {args.tasks} tasks", flush=True)
    connection.settings_dict["TEST"]["NAME"] = f"euler_bench_chaosf_{os.getpid()}"
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False)
    tmp = Path(tempfile.mkdtemp(prefix="chaosf-"))
    env = {**FAST, "EULER_JOB_ARRAY_MAX_COUNT": str(max(1000, args.tasks)), "EULER_SCHEDULE_TICK": "1"}
    platform, run, failed = Platform(tmp, env=env), None, 1
    try:
        started = time.monotonic()
        platform.start(timeout=180)
        run = Run(platform, args)
        for _ in range(2):
            run.chaos.add_node()
        run.submit()
        print(f"chaos-features: submitted; faults begin (first tick {run.first_tick:%H:%M})", flush=True)
        run.inject_until_done()
        jobs = run.wait_ended(timeout=300 + 3 * args.tasks)
        last = run.close_schedule()
        t = run.ticks(last)
        all_jobs = jobs + t.pop("jobs")
        failed = report(run, run.outputs(jobs), run.deps(jobs), t, run.jobs(all_jobs), time.monotonic() - started)
    finally:
        if args.keep or failed:
            dest = Path(args.keep or REPO / "var" / "chaos-features" / str(args.seed))
            platform.collect(dest)
            print(f"process logs kept in {dest}")
        if run is not None:
            run.chaos.cleanup()
        platform.stop()
        connection.close()
        connection.creation.destroy_test_db(old_name, verbosity=0)
        shutil.rmtree(tmp, ignore_errors=True)
    return failed


if __name__ == "__main__":
    sys.exit(main())
