"""Flapping: two priority classes and bursts of high-class jobs over two simulated hours, through the pure policy
(placements, preemptions, claims, the guards) with a simulated clock. No job is preempted more than
EULER_PREEMPT_MAX_PER_HOUR times in any hour, and fair share within the low class stays within ±10% of the weights.

The simulation is what the DB shell does, in memory: a victim stops one step after it is asked (its grace), goes
back to the queue (queued now), and its hourly count grows; reaching the cap makes it immune until it ends."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from jobs.scheduling import policy
from jobs.scheduling.snapshots import JobSnapshot, NodeSnapshot, ProjectLimit
from jobs.scheduling.victims import Guards, Running

GIB = 1024**3
STEP = 10.0  # seconds between passes (a victim's grace is one step)
HOURS = 2
N_NODES = 10
MAX_PER_HOUR = 2
GUARDS = Guards(min_run_seconds=60, max_per_hour=MAX_PER_HOUR)
WEIGHTS = {1: 1.0, 2: 3.0}  # the low class's two projects
HIGH_PROJECT = 3
CLAIM_SECONDS = 60.0


@dataclass
class Sim:
    now: float = 0.0
    next_id: int = 1
    queued: dict[int, JobSnapshot] = field(default_factory=dict)
    runtime: dict[int, float] = field(default_factory=dict)  # job id -> seconds of work it needs per run
    running: dict[int, tuple[int, float, int]] = field(default_factory=dict)  # job -> (node, started, attempt)
    stopping: dict[int, float] = field(default_factory=dict)  # job -> when its stop was asked
    preempted_at: dict[int, list[float]] = field(default_factory=dict)
    immune: set[int] = field(default_factory=set)
    claims: dict[int, tuple[int, float | None]] = field(default_factory=dict)  # preemptor -> (node, all stopped at)
    victims_of: dict[int, set[int]] = field(default_factory=dict)
    next_attempt: int = 1
    low_samples: list[tuple[float, float]] = field(default_factory=list)  # (project 1, project 2) CPU held
    jobs: dict[int, JobSnapshot] = field(default_factory=dict)  # every job seen, as last queued

    def submit(self, project: int, *, value: int, cpu: int, seconds: float) -> None:
        j = JobSnapshot(id=self.next_id, project_id=project, cpu_milli=cpu, memory_bytes=GIB, queued_at=self.now,
                        priority_value=value)  # fmt: skip
        self.queued[j.id] = j
        self.runtime[j.id] = seconds
        self.next_id += 1

    def nodes(self) -> list[NodeSnapshot]:
        used: dict[int, int] = {}
        for job_id, (node_id, _, _) in self.running.items():
            used[node_id] = used.get(node_id, 0) + self.jobs[job_id].cpu_milli
        return [
            NodeSnapshot(id=n, name=f"n{n}", cpu_milli=4000, memory_bytes=64 * GIB, trust="platform",
                         used_cpu_milli=used.get(n, 0), used_memory_bytes=0)
            for n in range(1, N_NODES + 1)
        ]  # fmt: skip

    def attempts(self) -> list[Running]:
        out = []
        for job_id, (node_id, started, attempt) in self.running.items():
            j = self.jobs[job_id]
            recent = [t for t in self.preempted_at.get(job_id, []) if t > self.now - 3600]
            out.append(Running(attempt_id=attempt, job_id=job_id, project_id=j.project_id, node_id=node_id,
                               priority_value=j.priority_value, cpu_milli=j.cpu_milli, memory_bytes=j.memory_bytes,
                               started_at=started, preempted_last_hour=len(recent), immune=job_id in self.immune,
                               stopping=job_id in self.stopping))  # fmt: skip
        return out

    def limits(self) -> dict[int, ProjectLimit]:
        held: dict[int, float] = {}
        active: dict[int, int] = {}
        for job_id in self.running:
            pid = self.jobs[job_id].project_id
            held[pid] = held.get(pid, 0.0) + self.jobs[job_id].cpu_milli
            active[pid] = active.get(pid, 0) + 1
        return {
            pid: ProjectLimit(active=active.get(pid, 0), weight=WEIGHTS.get(pid, 1.0),
                              held=(held.get(pid, 0.0), float(active.get(pid, 0) * GIB), 0.0))
            for pid in (1, 2, HIGH_PROJECT)
        }  # fmt: skip

    def step(self) -> None:
        # Victims asked one step ago have stopped: back to the queue, their retry budget untouched.
        for job_id, asked in list(self.stopping.items()):
            if asked < self.now:
                del self.stopping[job_id], self.running[job_id]
                j = self.jobs[job_id]
                self.queued[job_id] = JobSnapshot(**{**_fields(j), "queued_at": self.now})
        # Finished work ends (an ended job is never preempted again: its immunity ends with it).
        for job_id, (_, started, _) in list(self.running.items()):
            if job_id not in self.stopping and self.now - started >= self.runtime[job_id]:
                del self.running[job_id]
                self.immune.discard(job_id)
        for pid, (node_id, stopped_at) in list(self.claims.items()):
            victims_left = [v for v in self.victims_of[pid] if v in self.stopping]
            if pid not in self.queued:
                del self.claims[pid]
            elif not victims_left and stopped_at is None:
                self.claims[pid] = (node_id, self.now)
            elif stopped_at is not None and self.now - stopped_at > CLAIM_SECONDS:
                del self.claims[pid]
        self.jobs.update(self.queued)
        claims = {
            pid: (node_id, sum(1 for v in self.victims_of[pid] if v in self.stopping))
            for pid, (node_id, _) in self.claims.items()
        }
        plan = policy.place(
            self.queued.values(), self.nodes(), now=self.now, projects=self.limits(), claims=claims,
            running=self.attempts(), guards=GUARDS,
        )  # fmt: skip
        for p in plan.placements:
            del self.queued[p.job_id]
            self.claims.pop(p.job_id, None)
            self.running[p.job_id] = (p.node_id, self.now, self.next_attempt)
            self.next_attempt += 1
        for d in plan.preemptions:
            self.claims[d.job_id] = (d.node_id, None)
            self.victims_of[d.job_id] = {v.job_id for v in d.victims}
            for v in d.victims:
                assert v.job_id in self.running and v.job_id not in self.stopping
                self.stopping[v.job_id] = self.now
                times = self.preempted_at.setdefault(v.job_id, [])
                times.append(self.now)
                if len([t for t in times if t > self.now - 3600]) >= MAX_PER_HOUR:
                    self.immune.add(v.job_id)
        self.sample()
        self.now += STEP

    def sample(self) -> None:
        held = {1: 0.0, 2: 0.0}
        for job_id in self.running:
            pid = self.jobs[job_id].project_id
            if pid in held:
                held[pid] += self.jobs[job_id].cpu_milli
        self.low_samples.append((held[1], held[2]))


def _fields(j: JobSnapshot) -> dict:
    return {name: getattr(j, name) for name in JobSnapshot.__slots__}


def _run() -> Sim:
    sim = Sim()
    # The low class: long jobs, a few more than each project's weighted part of the 40 cores (10 and 30), so that
    # both always wait and a victim, requeued behind a few jobs, runs again soon (and may be preempted again).
    for pid, count in ((1, 15), (2, 35)):
        for k in range(count):
            sim.submit(pid, value=0, cpu=1000, seconds=4 * 3600 + 60 * k)
    while sim.now < HOURS * 3600:
        if sim.now % 600 == 0 and sim.now < (HOURS - 0.5) * 3600:  # a burst of high-class jobs every 10 minutes
            for k in range(6):
                sim.submit(HIGH_PROJECT, value=10, cpu=2000 if k % 2 else 3000, seconds=240)
        sim.step()
    return sim


@pytest.fixture(scope="module")
def sim() -> Sim:
    return _run()


def test_no_job_is_preempted_more_than_the_hourly_maximum_and_fair_share_holds_within_the_class(sim):
    preempted = {job_id: times for job_id, times in sim.preempted_at.items() if times}
    assert len(preempted) > 20, "the bursts must preempt: the test would prove nothing"
    assert max(len(times) for times in preempted.values()) == MAX_PER_HOUR  # the cap is reached, and holds
    for job_id, times in preempted.items():
        times.sort()
        for i, t in enumerate(times):  # any hour-long window holds at most MAX_PER_HOUR preemptions of the job
            assert len([u for u in times[i:] if u < t + 3600]) <= MAX_PER_HOUR, (job_id, times)
        assert sim.jobs[job_id].priority_value == 0  # only the lower class is ever preempted
    # Within the low class, each project's part of what the class holds, averaged after the first placements,
    # is within ±10% of its weight's part (1:3 → 25% and 75%).
    samples = sim.low_samples[30:]
    total = sum(a + b for a, b in samples)
    parts = {1: sum(a for a, _ in samples) / total, 2: sum(b for _, b in samples) / total}
    wsum = sum(WEIGHTS.values())
    for pid, part in parts.items():
        fair = WEIGHTS[pid] / wsum
        assert abs(part - fair) <= 0.1 * fair, (pid, part, fair)


def test_the_high_class_runs_its_bursts(sim):
    high = [j for j in sim.jobs.values() if j.project_id == HIGH_PROJECT]
    waiting = [j for j in high if j.id in sim.queued]
    assert high and not waiting  # every burst job was placed (by preempting where it found no room)
