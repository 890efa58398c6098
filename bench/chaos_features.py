"""Chaos across the new features: kill -9 of agents, workers, web and Redis under arrays, outputs, chains, a schedule.

An array whose tasks write outputs runs, dependency chains settle and a per-minute schedule ticks meanwhile.

    DATABASE_URL=postgres://root@127.0.0.1:5432/test REDIS_URL=redis://127.0.0.1:6379/0 \
        .venv/bin/python bench/chaos_features.py [--tasks 200] [--parallelism 10] [--seed N] [--min-chaos 90]

The real platform (tests/e2e/harness.py: web, two workers, beat, its own Redis) on a scratch PostgreSQL database
(created and dropped), two real `./euler-node` agents on the local Docker engine (image `euler-test/busybox`).
Submitted before the first fault: an array of --tasks tasks, each writing /out/result.txt (its own text); the
chains A → B (succeeded) → C (ended), F (exits 1) → G (succeeded) → H (ended), F → E (ended), and Z (succeeded)
on the whole array, each job writing its own /out/result.txt; a `* * * * *` schedule (overlap allow). Then a
seeded RNG (`--seed` replays it) kills -9 one of agent 1, agent 2, worker-control, worker, web, Redis every
2-6 s, each at least once, and brings it back after 0.3-2 s, until the array ended and --min-chaos seconds passed.

Printed at the end (bench/chaos_verdicts.py), from the database, the output store on disk and Docker's own event log:
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
import contextlib
import os
import random
import shutil
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.chaos_verdicts import CHAINS, TERMINAL, Verdicts, report  # noqa: E402
from nodeagent import protocol  # noqa: E402

IMAGE = "euler-test/busybox"
SMALL = {"image": IMAGE, "cpu_milli": 20, "memory_bytes": 16 << 20, "gpu_count": 0, "timeout_seconds": 120,
         "max_retries": 10, "retry_on": ["lost"], "outputs": ["/out"]}  # fmt: skip


def writer(prefix: str, what: str, seconds: str, code: int = 0) -> list[str]:
    """A job that writes its own text to /out/result.txt, runs `seconds`, and exits `code`."""
    return ["sh", "-c", f'mkdir -p /out && echo "chaos {prefix} {what}" > /out/result.txt && sleep {seconds}'
            f" && exit {code}"]  # fmt: skip


class Run(Verdicts):
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
        self.crashed: list[str] = []  # processes that exited on their own
        self.unfinished = 0  # jobs not ended when the verdicts were taken

    def cleanup(self) -> None:
        """This run's containers, by its nodes' label (the low-level list: no inspect that races a removal)."""
        import docker

        self.chaos._stream.close()
        client = docker.from_env()
        for name in self.chaos.nodes:
            for c in client.api.containers(all=True, filters={"label": f"{protocol.LABEL_NODE}={name}"}):
                with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
                    client.api.remove_container(c["Id"], force=True)

    def add_node(self) -> None:
        """As tests/e2e/test_chaos.Chaos.add_node, with the patience a loaded machine needs."""
        from nodes.models import Node
        from nodes.services import enrollment_token_create, node_approve

        name, wait = f"chaos-{uuid.uuid4().hex[:6]}", self.platform.wait_for
        _, token = enrollment_token_create(trust="platform", label="chaos")
        agent = self.platform.start_agent(name, token=token)
        node = wait(lambda: Node.objects.filter(name=name).first(), f"{name} enrolls", timeout=300, every=0.5)
        node_approve(node=node, trust="platform", public_pool=True)
        wait(lambda: "approved" in agent.log(), f"{name} learns it is approved", timeout=300, every=0.5)
        wait(lambda: Node.objects.get(name=name).online, f"{name} online", timeout=300, every=0.5)
        self.chaos.nodes.append(name)

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

    def revive_crashed(self) -> None:
        """A process that exited on its own (not one the bench killed: that one is back already) is started again,
        as compose's `restart: unless-stopped` would, and counted with the last line of its log that says why."""
        p = self.platform
        dead = [(name, proc) for name, proc in p.procs.items() if proc.popen is not None and not proc.alive()]
        if p._redis is not None and not p._redis.alive():
            dead.append(("redis", p._redis))
        for name, proc in dead:
            why = [ln for ln in proc.log().splitlines() if "CRITICAL" in ln or "Unrecoverable" in ln or "Error" in ln]
            self.crashed.append(f"{name} (exit {proc.popen.returncode}): {why[-1][:200] if why else '?'}")
            print(f"chaos: {self.crashed[-1]}; started again", flush=True)
            if name == "redis":
                p._start_redis()
            elif name.startswith("agent-"):
                p.restart_agent(name.removeprefix("agent-"))
            else:
                proc.start()

    def inject_until_done(self) -> None:
        victims = [f"agent:{n}" for n in self.chaos.nodes] + ["worker-control", "worker", "web", "redis"]
        plan = list(victims)
        self.rng.shuffle(plan)
        started = time.monotonic()
        while plan or not self.array_ended() or time.monotonic() - started < self.args.min_chaos:
            if time.monotonic() - started > self.args.max_chaos:
                print(f"chaos-features: faults stopped after --max-chaos {self.args.max_chaos} s", flush=True)
                break
            time.sleep(self.rng.uniform(*self.args.every))
            self.revive_crashed()
            self.chaos.inject(plan.pop() if plan else self.rng.choice(victims))
        self.chaos_seconds = time.monotonic() - started

    def wait_ended(self, timeout: float) -> list:
        from jobs.models import Job

        jobs = Job.objects.filter(project=self.project).exclude(name=f"cf{self.prefix}-tick")
        try:
            self.platform.wait_for(lambda: self.revive_crashed() or not jobs.exclude(state__in=TERMINAL).exists(),
                                   "every job ends", timeout=timeout, every=1)  # fmt: skip
        except AssertionError:  # the verdicts still say what they can (the unfinished jobs are counted)
            left = jobs.exclude(state__in=TERMINAL)
            self.unfinished += left.count()
            print(f"chaos-features: not every job ended within {timeout:.0f} s: {self.unfinished} left", flush=True)
        return list(jobs)

    def close_schedule(self) -> datetime:
        """Wait until a minute boundary is 20 s past (its run surely recorded), disable the schedule, wait for the
        tick jobs; returns the last boundary the verdict counts."""
        now = datetime.now(UTC)
        last = now.replace(second=0, microsecond=0)
        if now - last < timedelta(seconds=20):
            time.sleep(20 - (now - last).total_seconds())
        self.revive_crashed()
        r = self.http.patch(f"schedules/cf{self.prefix}-tick", json={"enabled": False}, timeout=60)
        assert r.status_code == 200, r.text
        from jobs.models import Job

        ticks = Job.objects.filter(project=self.project, name=f"cf{self.prefix}-tick")
        try:
            self.platform.wait_for(lambda: not ticks.exclude(state__in=TERMINAL).exists(), "tick jobs end", timeout=300)
        except AssertionError:
            self.unfinished += ticks.exclude(state__in=TERMINAL).count()
        return last


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--parallelism", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0, help="replay a run (0: a fresh seed, printed)")
    parser.add_argument("--min-chaos", type=float, default=90, help="inject faults at least this long (s)")
    parser.add_argument("--max-chaos", type=float, default=3600, help="and at most this long (s)")
    parser.add_argument("--every", type=float, nargs=2, default=(5.0, 15.0), metavar=("MIN", "MAX"),
                        help="seconds between faults, drawn uniformly (default 5 15)")  # fmt: skip
    parser.add_argument("--offline-after", type=int, default=30, help="EULER_NODE_OFFLINE_AFTER (default 30 s: "
                        "a killed agent restarts within it even on a loaded machine, and adopts its containers)")  # fmt: skip
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
    env = {
        **FAST,
        "EULER_JOB_ARRAY_MAX_COUNT": str(max(1000, args.tasks)),
        "EULER_SCHEDULE_TICK": "1",
        "EULER_NODE_OFFLINE_AFTER": str(args.offline_after),
    }
    platform, run, failed = Platform(tmp, env=env), None, 1
    try:
        started = time.monotonic()
        platform.start(timeout=180)
        run = Run(platform, args)
        for _ in range(2):
            run.add_node()
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
        try:
            if run is not None:
                run.cleanup()
        finally:
            platform.stop()  # every process it started, the job networks of its agents
            connection.close()
            connection.creation.destroy_test_db(old_name, verbosity=0)
            shutil.rmtree(tmp, ignore_errors=True)
    return failed


if __name__ == "__main__":
    sys.exit(main())
