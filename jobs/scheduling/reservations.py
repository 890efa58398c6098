"""Reservations, so that a stream of small jobs cannot starve a big one (pure).

A job that has waited `reserve_after` seconds reserves the node it fits best (now, or once that node's
running jobs end), while its project holds no more than its weighted fair share; later jobs may not take
capacity there that the reserved job needs (Capacity.allowed). At most one reservation per project and per
node in a pass, so a backlog cannot fence off the pool.
"""

from __future__ import annotations

from collections.abc import Mapping

from jobs.scheduling import reasons
from jobs.scheduling.capacity import Capacity, NodeClass, shape_of
from jobs.scheduling.fairshare import ProjectShare
from jobs.scheduling.filters import static_reject
from jobs.scheduling.gpufit import Reservation, gpu_kind
from jobs.scheduling.scores import reservation_rank
from jobs.scheduling.snapshots import JobSnapshot, ProjectLimit


def hold(state: Capacity, held: Mapping[int, JobSnapshot]) -> None:
    """Keep the reservations of an earlier batch of the same pass (node id -> job) standing in this one."""
    index = {node.id: i for i, node in enumerate(state.nodes)}
    for node_id, job in held.items():
        if node_id in index:
            state.reserved[index[node_id]] = Reservation(job)


def reserve(
    state: Capacity,
    queues: dict[int, list[JobSnapshot]],
    shares: dict[int, ProjectShare],
    entitled: dict[int, float],
    projects: Mapping[int, ProjectLimit],
    *,
    now: float,
    reserve_after: float,
    taken: Mapping[int, int] | None = None,
) -> dict[int, int]:
    """Before any placement: each project at or below its weighted fair share lets its first job (in its own
    order) that has waited longer than `reserve_after` reserve a node: the best that fits now, else the one
    it fits once the running jobs end that lacks the least. Projects go lowest share first; one per node. A job
    in `taken` (job id -> node index: reserved or claimed already) keeps what it has. Returns job id -> node index."""
    reserved: dict[int, int] = {}
    for pid in sorted(queues, key=lambda p: (shares[p].share, queues[p][0].queued_at, queues[p][0].id, p)):
        limit = projects.get(pid)
        if shares[pid].above(entitled[pid]) or _at_cap(limit):
            continue  # over its fair share it waits for that, not starved; at its cap it cannot start anyway
        job = _starved(queues[pid], now=now, reserve_after=reserve_after)
        if job is None or (taken and job.id in taken):
            continue
        plain, gpu = state.classes_for(job)
        i = reservable(state, plain, job) if job.gpu_count == 0 else None
        if i is None:
            i = reservable(state, gpu, job)
        if i is not None:
            state.reserved[i] = Reservation(job)
            reserved[job.id] = i
    return reserved


def _at_cap(limit: ProjectLimit | None) -> bool:
    return limit is not None and limit.max_concurrent is not None and limit.active >= limit.max_concurrent


def _starved(queue: list[JobSnapshot], *, now: float, reserve_after: float) -> JobSnapshot | None:
    """The project's first job (in its own order) past `reserve_after` and out of retry backoff, or None."""
    for job in queue:
        if now - job.queued_at > reserve_after and (job.not_before is None or job.not_before <= now):
            return job
    return None


def reservable(state: Capacity, classes: list[NodeClass], job: JobSnapshot) -> int | None:
    """The unreserved node the job fits once its running jobs end that lacks the least now (then the
    emptiest, then the lowest id), or None."""
    best, found, kind = None, None, gpu_kind(job)
    for cls in classes:
        for i in cls.members:
            node = state.nodes[i]
            if i in state.reserved or node.cpu_milli < job.cpu_milli or node.memory_bytes < job.memory_bytes:
                continue
            if len(state.usable(node.gpu_uuids, kind)) < job.gpu_count or (
                node.disk_bytes is not None and node.disk_bytes < job.disk_bytes
            ):
                continue
            key = reservation_rank(job, state.cpu[i], state.mem[i], state.free_gpus(i, kind), node.id)
            if best is None or key < best:
                best, found = key, i
    return found


def blocking(state: Capacity, job: JobSnapshot, reserve_after: float | None) -> str | None:
    """The pending reason when the job found no room but would fit where a reservation holds, else None."""
    shape = shape_of(job)
    names, older = [], True
    for i, r in sorted(state.reserved.items()):
        if r.job.id != job.id and state.fits(i, shape) and static_reject(state.nodes[i], job) is None:
            names.append(state.nodes[i].name or f"#{state.nodes[i].id}")
            older = older and (r.job.queued_at, r.job.id) < (job.queued_at, job.id)
    if not names:
        return None
    return reasons.reserved_for_others(names, older=older, reserve_after=reserve_after)
