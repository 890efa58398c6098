"""Weighted fair share on the dominant resource (DRF), pure: the capacity each project may use, its share of it,
its weighted entitlement, the decayed recent usage that `EULER_FAIRSHARE_HALF_LIFE` blends in, and whose turn
it is to place next.

A project's share is the largest of its CPU, memory and GPU holdings over the capacity it may use, divided by
its weight. Capacity is what approved, online, not draining nodes offer to the project: the shared pool
(platform nodes and community nodes admitted to it) plus the nodes it owns.

Order: each placement goes to the next job of the project with the lowest share, recomputed after every
placement (Turns); within a project, `priority` (higher first), then FIFO.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Mapping

from jobs.scheduling.snapshots import JobSnapshot, NodeSnapshot, ProjectLimit

Vector = tuple[float, float, float]  # CPU millicores, memory bytes, GPUs
ZERO: Vector = (0.0, 0.0, 0.0)
RESOURCES = ("CPU", "memory", "GPUs")


def _add(a: Vector, b: Vector) -> Vector:
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


def pool_capacity(nodes: Iterable[NodeSnapshot]) -> tuple[Vector, dict[int, Vector]]:
    """Totals of usable nodes: (the shared pool, {project id: its own nodes outside the shared pool})."""
    cpu = mem = gpus = 0.0  # the shared pool's, summed in node order (as _add would: the same floats)
    own: dict[int, Vector] = {}
    for node in nodes:
        if not (node.approved and node.online and not node.draining):
            continue
        if node.shared:
            cpu += float(node.cpu_milli)
            mem += float(node.memory_bytes)
            gpus += float(len(node.gpu_uuids))
        elif node.owner_project_id is not None:
            total = (float(node.cpu_milli), float(node.memory_bytes), float(len(node.gpu_uuids)))
            own[node.owner_project_id] = _add(own.get(node.owner_project_id, ZERO), total)
    return (cpu, mem, gpus), own


def capacity_for(project_id: int, shared: Vector, own: Mapping[int, Vector]) -> Vector:
    return _add(shared, own.get(project_id, ZERO))


def dominant(held: Vector, capacity: Vector) -> tuple[float, int]:
    """The largest fraction of capacity held, and which resource it is (index into RESOURCES)."""
    best, which = 0.0, 0
    for r in range(3):
        if capacity[r] > 0:
            fraction = held[r] / capacity[r]
            if fraction > best:
                best, which = fraction, r
    return best, which


def blended(held: Vector, recent: Vector | None) -> Vector:
    """What the share counts: the holdings now, or (with a half-life) half of them plus half of the recent average
    for CPU and GPUs. The ledger has no memory: memory counts as held now, whatever the half-life."""
    if recent is None:
        return held
    return ((held[0] + recent[0]) / 2, held[1], (held[2] + recent[2]) / 2)


def entitlements(weights: Mapping[int, float]) -> dict[int, float]:
    """Each project's weighted fair fraction of the capacity, among the projects given (those with queued work)."""
    total = sum(weights.values())
    return {pid: (w / total if total > 0 else 0.0) for pid, w in weights.items()}


def decayed_average(amounts: Iterable[tuple[float, float]], *, now: float, half_life: float) -> float:
    """The average holding that decayed usage amounts to, as Slurm's decayed fair-share usage does.

    `amounts` are (when, amount) pairs: resource-seconds used around `when` (a timestamp). Usage `age` seconds
    old counts 2**(-age/half_life); a project that held x all along sums to x * half_life / ln 2, so
    multiplying by ln 2 / half_life turns the sum back into a holding comparable with what runs now.
    """
    if half_life <= 0:
        return 0.0
    total = 0.0
    for when, amount in amounts:
        total += amount * 2.0 ** (-max(0.0, now - when) / half_life)
    return total * math.log(2) / half_life


class ProjectShare:
    """A project's weight, holdings (this pass's placements added), the capacity it may use, and its share."""

    __slots__ = ("weight", "held", "recent", "capacity", "dominant", "share")

    def __init__(self, limit: ProjectLimit | None, capacity: Vector) -> None:
        self.weight = limit.weight if limit is not None and limit.weight > 0 else 1.0
        self.held = list(limit.held) if limit is not None else [0.0, 0.0, 0.0]
        self.recent = limit.recent if limit is not None else None
        self.capacity = capacity
        self.update()

    def update(self) -> None:
        counted = blended((self.held[0], self.held[1], self.held[2]), self.recent)
        self.dominant = dominant(counted, self.capacity)[0]
        self.share = self.dominant / self.weight

    def add(self, job: JobSnapshot) -> None:
        """Count a placement of this pass."""
        held = self.held
        held[0] += job.cpu_milli
        held[1] += job.memory_bytes
        held[2] += job.gpu_count
        if self.recent is not None:
            self.update()
            return
        cap = self.capacity  # dominant() inlined: this runs once per placement
        d = held[0] / cap[0] if cap[0] > 0 else 0.0
        if cap[1] > 0 and held[1] / cap[1] > d:
            d = held[1] / cap[1]
        if cap[2] > 0 and held[2] / cap[2] > d:
            d = held[2] / cap[2]
        self.dominant, self.share = d, d / self.weight

    def above(self, entitled: float) -> bool:
        """Whether the project holds more than its weighted fair fraction (`entitled`, see entitlements)."""
        return self.dominant > entitled + 1e-9

    def holds(self) -> float:
        """The fraction of its capacity the project holds now (the dominant resource, unweighted, no history)."""
        return dominant((self.held[0], self.held[1], self.held[2]), self.capacity)[0]


def project_shares(
    project_ids: Iterable[int], projects: Mapping[int, ProjectLimit], nodes: Iterable[NodeSnapshot]
) -> dict[int, ProjectShare]:
    """Each project's share tracker, over the capacity the nodes offer it."""
    shared, own = pool_capacity(nodes)
    return {pid: ProjectShare(projects.get(pid), capacity_for(pid, shared, own)) for pid in project_ids}


class Turns:
    """Which project places next: the lowest share, then the oldest next job (queued_at, id), then the lowest id."""

    def __init__(self, queues: Mapping[int, list[JobSnapshot]], shares: Mapping[int, ProjectShare]) -> None:
        self.heap = [(shares[pid].share, queue[0].queued_at, queue[0].id, pid) for pid, queue in queues.items()]
        heapq.heapify(self.heap)

    def next(self, pid: int | None = None, share: float = 0.0, job: JobSnapshot | None = None) -> int | None:
        """The project whose turn it is, or None when every queue is done. After project `pid` placed a job, it
        competes again with its new `share` and its next `job` (and keeps the turn while it is the lowest);
        without a next job (it placed its last, or could place nothing more) it is done."""
        if job is not None:
            return heapq.heappushpop(self.heap, (share, job.queued_at, job.id, pid))[3]
        return heapq.heappop(self.heap)[3] if self.heap else None
