"""Why a queued job stays queued: every pending reason the policy writes, word for word, in one place (pure).

Users read these on the job (`pending_reason`) and tests compare them whole: change one only on purpose.
"""

from __future__ import annotations

from jobs.scheduling.capacity import Capacity, NodeClass, shape_of
from jobs.scheduling.filters import (
    ISOLATION_PHRASES,
    REASON_ORDER,
    STATIC_PHRASES,
    capacity_phrases,
    capacity_reject,
)
from jobs.scheduling.snapshots import JobSnapshot

NO_SANDBOX = "no node with a sandboxed runtime in your pool: "
CAPACITY_REASONS = frozenset({"gpus", "cpu", "memory", "disk", "busy"})
REASON_BACKOFF = "waiting for retry backoff"
REASON_PACED = (
    "waiting for nodes to start the attempts already handed to them "
    "(the scheduler paces handovers: EULER_SCHEDULER_HANDOVER_WINDOW)"
)


def concurrency_quota(active: int, cap: int) -> str:
    return f"concurrency_quota: the project runs {active} of {cap} concurrent jobs"


def reserved_node_busy(name: str) -> str:
    """The job reserved a node that has not room for it yet."""
    return f"reserved node {name}: waiting for its running jobs to end"


def preempting(count: int, name: str) -> str:
    """The job preempts lower-class jobs on a node and waits for them to stop (the node is held for it)."""
    jobs = "1 lower-class job" if count == 1 else f"{count} lower-class jobs"
    return f"waiting for preemption: {jobs} stopping on node {name}"


def fair_share(holds: float, weight: float) -> str:
    """Capacity the job could use exists but is held: it waits because its project holds more than its share."""
    return f"waiting for its fair share (project holds {holds:.0%} of eligible capacity, weight {weight:g})"


def reserved_for_others(names: list[str], *, older: bool, reserve_after: float | None) -> str:
    """The job would fit on these nodes but for their reservations (for older jobs, or for jobs waiting longer)."""
    whom = "an older job" if older else f"a job that has waited over {reserve_after or 0:g} s"
    if len(names) == 1:
        return f"node {names[0]} reserved for {whom}"
    shown = ", ".join(names[:3]) + (", …" if len(names) > 3 else "")
    whom = "older jobs" if older else f"jobs that have waited over {reserve_after or 0:g} s"
    return f"{len(names)} nodes reserved for {whom} ({shown})"


def explain(state: Capacity, job: JobSnapshot) -> str:
    """Which filters removed how many nodes, e.g. "no node fits: 3 lack 2 free GPUs, 4 are in another region".

    Static filters are counted per class; only classes that pass them are scanned node by node.
    """
    if not state.nodes:
        return "no node fits: there are no nodes"
    counts: dict[str, int] = {}
    for cls, why in zip(state.classes, state.static_rejects(job), strict=True):
        if why is not None:
            counts[why] = counts.get(why, 0) + len(cls.members)
            continue
        for why, n in capacity_counts(state, cls, job).items():
            counts[why] = counts.get(why, 0) + n
    phrases = {**STATIC_PHRASES, **ISOLATION_PHRASES, **capacity_phrases(job)}
    parts = [f"{counts[name]} {phrases[name]}" for name in REASON_ORDER if counts.get(name)]
    if (counts.get("isolation") or counts.get("sandbox_network")) and not set(counts) & CAPACITY_REASONS:
        return NO_SANDBOX + ", ".join(parts)
    return "no node fits: " + ", ".join(parts)


def capacity_counts(state: Capacity, cls: NodeClass, job: JobSnapshot) -> dict[str, int]:
    """How many of the class's nodes each capacity filter removes (cached per shape within the pass)."""
    shape = shape_of(job)
    found = cls.explained.get(shape)
    if found is None:
        found = {}
        if job.gpu_count and not cls.has_gpu:
            found["gpus"] = len(cls.members)
        else:
            cpu, mem, disk, kind = state.cpu, state.mem, state.disk, shape[4]
            for i in cls.members:
                why = capacity_reject(cpu[i], mem[i], state.free_gpus(i, kind), disk[i], job) or "busy"
                found[why] = found.get(why, 0) + 1
        cls.explained[shape] = found
    return found
