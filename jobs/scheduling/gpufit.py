"""Typed-GPU selection for the capacity of one pass: which free GPUs of a node a request may take, and what a
reservation holds (pure).

A typed request (a model glob, a least memory) counts only the GPUs whose kind (NVML name, memory) it
matches; each kind is matched once per pass. `Capacity` (jobs/scheduling/capacity.py) mixes this in; this module
knows nothing of it (.importlinter: scheduling-gpufit-below-capacity).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nodeagent.gpumatch import gpu_matches

if TYPE_CHECKING:
    from jobs.scheduling.snapshots import JobSnapshot, NodeSnapshot

GpuKind = tuple[str, int] | None  # a typed GPU request: (model glob, least memory bytes); None: any GPU
# What a job takes: millicores, memory bytes, GPUs, disk bytes, and which GPUs count (its GpuKind).
Shape = tuple[int, int, int, int, GpuKind]


def gpu_kind(job: JobSnapshot) -> GpuKind:
    if job.gpu_count and (job.gpu_model or job.gpu_min_memory_bytes):
        return (job.gpu_model, job.gpu_min_memory_bytes)
    return None


class Reservation:
    """What a node is held for: a job's resources, which later jobs may not take from it."""

    __slots__ = ("job", "cpu", "mem", "gpus", "disk", "kind")

    def __init__(self, job: JobSnapshot) -> None:
        self.job = job
        self.cpu, self.mem, self.gpus = job.cpu_milli, job.memory_bytes, job.gpu_count
        self.disk = job.disk_bytes
        self.kind = gpu_kind(job)  # a typed reservation keeps GPUs of its kind, not just a count


class TypedGpus:
    """The GPU side of Capacity: its free GPUs per node, and what a request of each kind may take of them."""

    nodes: list[NodeSnapshot]
    gpus: list[list[str]]
    reserved: dict[int, Reservation]
    _gpu_kind: dict[str, tuple[str, int]] | None
    _matching: dict[tuple[str, int], frozenset[tuple[str, int]]]

    @property
    def gpu_kind(self) -> dict[str, tuple[str, int]]:
        if self._gpu_kind is None:
            self._gpu_kind = {u: k for n in self.nodes for u, k in zip(n.gpu_uuids, n.gpu_kinds, strict=False)}
        return self._gpu_kind

    def matching(self, kind: tuple[str, int]) -> frozenset[tuple[str, int]]:
        """The GPU kinds (NVML name, memory) in this pass that a typed request takes: matched once per pass."""
        found = self._matching.get(kind)
        if found is None:
            glob, least = kind
            kinds = {k for n in self.nodes for k in n.gpu_kinds}
            found = self._matching[kind] = frozenset(
                k for k in kinds if gpu_matches(k[0], k[1], glob=glob, min_memory_bytes=least)
            )
        return found

    def usable(self, uuids: list[str] | tuple[str, ...], kind: GpuKind) -> list[str]:
        """Of these GPUs (in device order), those a request of this kind may take."""
        if kind is None:
            return list(uuids)
        ok, kinds = self.matching(kind), self.gpu_kind
        return [u for u in uuids if kinds.get(u) in ok]

    def free_gpus(self, i: int, kind: GpuKind) -> int:
        """How many of node i's free GPUs a request of this kind may take."""
        return len(self.gpus[i]) if kind is None else len(self.usable(self.gpus[i], kind))

    def _leaves_typed(self, i: int, shape: Shape, r: Reservation) -> bool:
        """Whether the GPUs `shape` would take on node i (as place() picks them) leave the typed reservation the
        matching GPUs it needs (every free one it matches, while it waits for more to free up)."""
        taken = set(self.picks(i, shape[2], shape[4]))
        matching = self.usable(self.gpus[i], r.kind)
        return sum(1 for u in matching if u not in taken) >= min(r.gpus, len(matching))

    def picks(self, i: int, count: int, kind: GpuKind) -> list[str]:
        """The GPUs a job of this kind takes on node i, in device order; on a node held for a typed reservation
        of another kind, the GPUs that reservation cannot use first."""
        free = self.usable(self.gpus[i], kind)
        r = self.reserved.get(i)
        if r is not None and r.kind is not None and r.kind != kind:
            keep = set(self.usable(free, r.kind))
            free = [u for u in free if u not in keep] + [u for u in free if u in keep]
        return free[:count]
