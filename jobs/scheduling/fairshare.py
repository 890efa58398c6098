"""Weighted fair share on the dominant resource (DRF), pure: the capacity each project may use, its share of it,
its weighted entitlement, and the decayed recent usage that `EULER_FAIRSHARE_HALF_LIFE` blends in.

A project's share is the largest of its CPU, memory and GPU holdings over the capacity it may use, divided by
its weight. Capacity is what approved, online, not draining nodes offer to the project: the shared pool
(platform nodes and community nodes admitted to it) plus the nodes it owns.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from jobs.scheduling.snapshots import NodeSnapshot

Vector = tuple[float, float, float]  # CPU millicores, memory bytes, GPUs
ZERO: Vector = (0.0, 0.0, 0.0)
RESOURCES = ("CPU", "memory", "GPUs")


def _add(a: Vector, b: Vector) -> Vector:
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


def pool_capacity(nodes: Iterable[NodeSnapshot]) -> tuple[Vector, dict[int, Vector]]:
    """Totals of usable nodes: (the shared pool, {project id: its own nodes outside the shared pool})."""
    shared, own = ZERO, {}
    for node in nodes:
        if not (node.approved and node.online and not node.draining):
            continue
        total = (float(node.cpu_milli), float(node.memory_bytes), float(len(node.gpu_uuids)))
        if node.shared:
            shared = _add(shared, total)
        elif node.owner_project_id is not None:
            own[node.owner_project_id] = _add(own.get(node.owner_project_id, ZERO), total)
    return shared, own


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
