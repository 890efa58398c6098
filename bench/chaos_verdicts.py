"""The verdicts of bench/chaos_features.py: outputs, dependencies, schedule ticks and jobs, read from the database,
the output store on disk and Docker's own event log after the run; and the printed figures."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta

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


class Verdicts:
    """Mixed into bench/chaos_features.Run: reads its platform, project, prefix, array_id, args, chaos, first_tick."""

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
        out = {
            "silent": 0,
            "lost": [],
            "double": [],
            "wrong_bytes": [],
            "other_attempt": [],
            "orphaned": [],
            "stray": [],
        }
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
                out["silent"] += not job.outputs_truncated  # the job does not say that its file is missing
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
        double += [
            f"{j.name} (containers {_spans(containers[j.id])}; attempts {_attempts(by_job.get(j.id, []))})"
            for j in jobs
            if overlapping(containers.get(j.id, []))
        ]
        return {
            "not_succeeded": [f"{j.name}: {j.state}/{j.reason}" for j in jobs if j.state != "succeeded"],
            "jobs": len(jobs),
            "not_ended_once": [j.name for j in jobs if ends.get(j.id, 0) != 1],
            "double_runs": double,
            "attempts": sum(len(v) for v in by_job.values()),
            "states": dict(Counter(j.state for j in jobs)),
            "retried": dict(
                Counter(f"{a.state}/{a.reason}" for v in by_job.values() for a in v if a.state != "succeeded")
            ),
        }


def _spans(runs: list) -> str:
    t0 = min(start for start, _ in runs)
    return ", ".join(f"[{start - t0:.1f}, {'-' if die is None else f'{die - t0:.1f}'}]" for start, die in sorted(runs))


def _attempts(attempts: list) -> str:
    return ", ".join(
        f"#{a.number} node {a.node_id} {a.state}/{a.reason} {a.started_at and a.started_at.strftime('%H:%M:%S.%f')[:12]}"
        f"–{a.ended_at and a.ended_at.strftime('%H:%M:%S.%f')[:12]}"
        for a in attempts
    )


def report(run, o: dict, d: dict, t: dict, j: dict, took: float) -> int:
    p = print
    p(f"chaos-features: seed {run.args.seed}, array of {run.args.tasks} tasks (parallelism {run.args.parallelism}), "
      f"{len(CHAINS)} chain jobs, a * * * * * schedule; {len(run.chaos.faults)} faults in {run.chaos_seconds:.0f} s "
      f"({dict(Counter(run.chaos.faults))}); wall {took:.0f} s")  # fmt: skip
    p(f"outputs: {o['stored']} complete rows; lost {len(o['lost'])} (not said on the job {o['silent']}), double {len(o['double'])}, wrong bytes "
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
        "exited on their own": run.crashed,
        "not ended once": j["not_ended_once"], "double runs": j["double_runs"],
    }  # fmt: skip
    if run.unfinished:
        p(f"jobs not ended when the verdicts were taken: {run.unfinished} (the run is incomplete)")
    if j["not_succeeded"]:
        p(f"jobs that did not succeed: {j['not_succeeded']}")
    if run.crashed:
        p(f"processes that exited on their own (restarted by the bench): {len(run.crashed)}")
    failed = 0
    for what, items in bad.items():
        if items:
            failed = 1
            p(f"  {what}: {items[:10]}{' …' if len(items) > 10 else ''}")
    return failed or int(t["doubled"] > 0 or run.unfinished > 0)
