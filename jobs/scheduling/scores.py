"""How the policy ranks the nodes a job may use: pure arithmetic over free capacity.

Spread: a job goes to the node with the most capacity free (cores, GiB and GPUs in one number), so load
spreads and big holes stay open. GPU-aware: a CPU-only job uses nodes without GPUs while one fits
(capacity.Capacity.best_node). A reservation goes to the node that lacks the least for the job.
"""

from __future__ import annotations

from jobs.scheduling.snapshots import JobSnapshot

GIB = 1024**3
GPU_WEIGHT = 8.0  # a free GPU counts like 8 cores in the spread score


def spread(cpu_milli: int, memory_bytes: int, gpus: int) -> float:
    """A node's free capacity as one number: higher is emptier, and placed on first."""
    return cpu_milli / 1000 + memory_bytes / GIB + GPU_WEIGHT * gpus


def reservation_rank(job: JobSnapshot, cpu_milli: int, memory_bytes: int, gpus: int, node_id: int) -> tuple:
    """Which node a starved job reserves, lowest first: the one that lacks the least for it now (in the spread
    score's units; 0: it fits now), then the emptiest (the highest spread score), then the lowest id."""
    short = (
        max(0, job.cpu_milli - cpu_milli) / 1000
        + max(0, job.memory_bytes - memory_bytes) / GIB
        + GPU_WEIGHT * max(0, job.gpu_count - gpus)
    )
    return (short, -(cpu_milli / 1000 + memory_bytes / GIB + GPU_WEIGHT * gpus), node_id)  # -spread(...), inlined


# Reliability (lending/reliability.py): a job that may run this long tries the nodes scored at least
# PREFERRED_RELIABILITY first (spread decides among them), and the others only when none of those has room.
LONG_JOB_SECONDS = 3600
PREFERRED_RELIABILITY = 90.0


def reliability_marks(jobs: list[JobSnapshot]) -> tuple[float, ...]:
    """The scores that split nodes into classes in this pass: every min_reliability asked, and the preferred
    mark when a long job waits (none: the score makes no difference, and costs no classes)."""
    marks = {job.min_reliability for job in jobs if job.min_reliability}
    if any(job.timeout_seconds >= LONG_JOB_SECONDS for job in jobs):
        marks.add(PREFERRED_RELIABILITY)
    return tuple(sorted(marks))


def prefer_reliable(classes: list) -> tuple[list, list]:
    """Node classes split into those scored at least PREFERRED_RELIABILITY and the rest (order kept)."""
    good = [c for c in classes if c.rep.reliability is not None and c.rep.reliability >= PREFERRED_RELIABILITY]
    if not good:
        return ([], classes)
    return (good, [c for c in classes if c not in good])
