"""The free capacity of one pass: what each node has left, and which node a job takes next (pure).

Nodes are not scanned per job. Nodes that share every attribute the static filters read form a class, held
in a max-heap by spread score; a job checks the static filters once per class (cached per eligibility key)
and takes the best top of its eligible classes' heaps. A placement re-scores one node (a new heap entry; the
old one is dropped lazily by version), and a shape that found no room in a class is remembered so that
equal or larger jobs skip it (and, per eligibility key, the same shape skips every class). Capacity only
shrinks within a pass, and a consumed reservation frees nothing (its job takes exactly what it kept back),
which keeps these shortcuts exact. A class whose heap top already ranks below the best node found for a
job is not searched. The
cost per placement grows with the number of distinct node classes a job may use, not with the number of nodes.
"""

from __future__ import annotations

import heapq

from jobs.scheduling.filters import static_reject
from jobs.scheduling.gpufit import Reservation, Shape, TypedGpus, gpu_kind
from jobs.scheduling.scores import LONG_JOB_SECONDS, prefer_reliable, reliability_marks, spread
from jobs.scheduling.snapshots import JobSnapshot, NodeSnapshot

UNLIMITED = 1 << 62  # the free disk of a node that does not report disk


def shape_of(job: JobSnapshot) -> Shape:
    return (job.cpu_milli, job.memory_bytes, job.gpu_count, job.disk_bytes, gpu_kind(job))


def eligibility_key(job: JobSnapshot) -> tuple:
    """What of a job the static filters read: jobs with the same key may use the same node classes."""
    return (
        job.project_id,
        job.region,
        job.node_selector,
        job.pool,
        job.min_trust,
        job.needs_secrets,
        job.networked,
        job.image,
        job.isolation,
        job.timeout_seconds,  # lenders' windows and hour limits
        job.checkpoint_lead,  # a checkpoint lets a job start before a window's close
        job.min_reliability,
    )


class Relevant:
    """What of a node the queued jobs can tell apart: only these attributes split nodes into classes.

    A label no selector names, a region no job asks for, or an owner project with no queued job makes
    no difference to any static filter in this pass, so nodes differing only there share a class.
    """

    def __init__(self, jobs: list[JobSnapshot]) -> None:
        self.label_keys = frozenset({k for job in jobs if job.node_selector for k, _ in job.node_selector})
        self.regions = frozenset(job.region for job in jobs if job.region)
        self.projects = frozenset(job.project_id for job in jobs)
        self.marks = reliability_marks(jobs)  # the scores that some job's min_reliability or length tells apart
        self._labels: dict[frozenset, frozenset] = {}  # nodes share label sets: project each set once

    def labels(self, labels: frozenset) -> frozenset | tuple:
        found = self._labels.get(labels)
        if found is None:
            found = self._labels[labels] = frozenset(item for item in labels if item[0] in self.label_keys)
        return found

    def class_key(self, node: NodeSnapshot) -> tuple:
        labels = self.labels(node.labels) if self.label_keys and node.labels else ()
        return (
            node.approved,
            node.online,
            node.draining,
            node.trust,
            node.public_pool,
            node.owner_project_id if node.owner_project_id in self.projects else None,
            node.region if node.region in self.regions else None,
            labels,
            node.runs_networked,
            node.image_patterns,
            node.runtimes,
            node.min_isolation,
            bool(node.gpu_uuids),
            node.terms_open,
            node.terms_left,
            node.terms_projects,
            node.terms_max_seconds,
            tuple(node.reliability is not None and node.reliability >= m for m in self.marks) if self.marks else (),
        )


class NodeClass:
    """Nodes sharing static attributes, in a max-heap by free capacity (lazy entries, checked by version)."""

    __slots__ = ("rep", "members", "entries", "too_big", "has_gpu", "explained", "totals")

    def __init__(self, rep: NodeSnapshot) -> None:
        self.rep = rep
        self.has_gpu = bool(rep.gpu_uuids)
        self.members: list[int] = []
        self.entries: list[tuple] = []
        self.too_big: list[Shape] = []  # shapes that found no room here this pass
        self.explained: dict[Shape, dict[str, int]] = {}  # reasons.capacity_counts, per shape
        self.totals: set[tuple] | None = None  # the distinct node sizes, once asked for (fits_once_free)


class Capacity(TypedGpus):
    """Free capacity per node (by index in id order), node classes, per-job-key eligible classes, reservations."""

    def __init__(self, nodes: list[NodeSnapshot], relevant: Relevant) -> None:
        self.nodes = nodes
        self.cpu = [n.cpu_milli - n.used_cpu_milli for n in nodes]
        self.mem = [n.memory_bytes - n.used_memory_bytes for n in nodes]
        # Disk counts like memory; a node that does not report disk is not limited by it.
        self.disk = [UNLIMITED if n.disk_bytes is None else n.disk_bytes - n.used_disk_bytes for n in nodes]
        none: list[str] = []  # shared by nodes without GPUs: only ever sliced by zero
        self.gpus = [
            ([u for u in n.gpu_uuids if u not in n.used_gpus] if n.used_gpus else list(n.gpu_uuids))
            if n.gpu_uuids
            else none
            for n in nodes
        ]
        # Each GPU's (NVML name, memory): a typed request counts only the GPUs whose kind it matches.
        self._gpu_kind: dict[str, tuple[str, int]] | None = None  # built when a typed request first asks
        self._matching: dict[tuple[str, int], frozenset[tuple[str, int]]] = {}  # request -> the GPU kinds it takes
        self.version = [0] * len(nodes)
        self.node_class: list[NodeClass] = []
        self.classes = self._classes(relevant)  # in order of their lowest node id: deterministic
        self.eligible: dict[tuple, tuple[list[NodeClass], list[NodeClass], set[Shape]]] = {}  # see _eligible
        self.rejects: dict[tuple, list[str | None]] = {}  # per eligibility key: each class's static reason
        self.reserved: dict[int, Reservation] = {}  # node index -> the job it is held for

    def _classes(self, relevant: Relevant) -> list[NodeClass]:
        by_key: dict[tuple, NodeClass] = {}
        append_class, class_key = self.node_class.append, relevant.class_key
        cpu, mem, gpus = self.cpu, self.mem, self.gpus
        for i, node in enumerate(self.nodes):
            key = class_key(node)
            cls = by_key.get(key)
            if cls is None:
                cls = by_key[key] = NodeClass(node)
            cls.members.append(i)
            cls.entries.append((-spread(cpu[i], mem[i], len(gpus[i])), node.id, i, 0))  # entry(i), at version 0
            append_class(cls)
        for cls in by_key.values():
            heapq.heapify(cls.entries)
        return list(by_key.values())

    def entry(self, i: int) -> tuple:
        """Node i's heap entry: highest score first, then the lowest id; stale once its version moves on."""
        return (-spread(self.cpu[i], self.mem[i], len(self.gpus[i])), self.nodes[i].id, i, self.version[i])

    def classes_for(self, job: JobSnapshot) -> tuple[list[NodeClass], list[NodeClass]]:
        """The classes whose nodes pass every static filter for the job: (those without GPUs, those with)."""
        plain, gpu, _ = self._eligible(job)
        return plain, gpu

    def _eligible(self, job: JobSnapshot) -> tuple[list[NodeClass], list[NodeClass], set[Shape]]:
        """classes_for, and the shapes that found no room in any of those classes this pass."""
        key = eligibility_key(job)
        found = self.eligible.get(key)
        if found is None:
            plain, gpu = [], []
            rejects = self.rejects[key] = [static_reject(cls.rep, job) for cls in self.classes]
            for cls, why in zip(self.classes, rejects, strict=True):
                if why is None:
                    (gpu if cls.has_gpu else plain).append(cls)
            found = self.eligible[key] = (plain, gpu, set())
        return found

    def static_rejects(self, job: JobSnapshot) -> list[str | None]:
        """Per class (in order), the first static filter that removes its nodes for the job, or None."""
        key = eligibility_key(job)
        if key not in self.rejects:
            self.classes_for(job)
        return self.rejects[key]

    def fits(self, i: int, shape: Shape) -> bool:
        return (
            self.cpu[i] >= shape[0]
            and self.mem[i] >= shape[1]
            and self.free_gpus(i, shape[4]) >= shape[2]
            and self.disk[i] >= shape[3]
        )

    def allowed(self, i: int, shape: Shape) -> bool:
        """Whether taking `shape` on node i leaves what its reservation needs of every resource it takes.

        Monotone in the shape, like fits(): the too-big shortcut stays exact on reserved nodes.
        """
        r = self.reserved.get(i)
        if r is None:
            return True
        return (
            (not shape[0] or self.cpu[i] - shape[0] >= r.cpu)
            and (not shape[1] or self.mem[i] - shape[1] >= r.mem)
            and (not shape[3] or self.disk[i] - shape[3] >= r.disk)
            and (
                not shape[2]
                or (len(self.gpus[i]) - shape[2] >= r.gpus if r.kind is None else self._leaves_typed(i, shape, r))
            )
        )

    def best_in(self, cls: NodeClass, shape: Shape) -> tuple | None:
        """The class's highest-scoring node with room for `shape` (left in the heap), or None."""
        kind = shape[4]
        for c, m, g, d, k in cls.too_big:  # a request of any GPU found none: a typed one finds none either
            if c <= shape[0] and m <= shape[1] and g <= shape[2] and d <= shape[3] and (k is None or k == kind):
                return None
        entries, aside, found = cls.entries, [], None
        cpu, mem, gpus, disk, version = self.cpu, self.mem, self.gpus, self.disk, self.version
        while entries:
            entry = entries[0]
            i = entry[2]
            if entry[3] != version[i]:
                heapq.heappop(entries)  # stale: the node has a newer entry
                continue
            # fits(), inlined: this is the hot loop
            if (
                cpu[i] >= shape[0]
                and mem[i] >= shape[1]
                and len(gpus[i]) >= shape[2]
                and disk[i] >= shape[3]
                and (kind is None or self.free_gpus(i, kind) >= shape[2])
                and (not self.reserved or self.allowed(i, shape))
            ):
                found = entry
                break
            aside.append(heapq.heappop(entries))
        for entry in aside:
            heapq.heappush(entries, entry)
        if found is None:
            cls.too_big.append(shape)
        return found

    def take(self, classes: list[NodeClass], shape: Shape) -> int | None:
        """The highest-scoring node of these classes with room for `shape` (and the reservation there), or None."""
        best = None
        for cls in classes:
            if best is not None and cls.entries and cls.entries[0] > best:
                continue  # even its top entry (fresh or stale) ranks below the best found: none of its nodes wins
            entry = self.best_in(cls, shape)
            if entry is not None and (best is None or entry < best):
                best = entry
        return None if best is None else best[2]

    def best_node(self, job: JobSnapshot) -> int | None:
        """Where the job goes now: a CPU-only job takes a node without GPUs while one fits, else any."""
        plain, gpu, full = self._eligible(job)
        shape = shape_of(job)
        if shape in full:
            return None  # the same kind of job found no room earlier in this pass
        groups = (plain, gpu) if job.gpu_count == 0 else (gpu,)
        if job.timeout_seconds >= LONG_JOB_SECONDS:  # a long job tries the reliable nodes of each group first
            groups = tuple(part for classes in groups for part in prefer_reliable(classes))
        for classes in groups:
            i = self.take(classes, shape)
            if i is not None:
                return i
        full.add(shape)
        return None

    def best_node_avoiding(self, job: JobSnapshot, avoid: list[int]) -> int | None:
        """best_node with the nodes at these indices left out as if full (jobs/scheduling/spread.py); the pass's
        shortcuts (each class's too-big shapes, the eligible key's full shapes) are left as they were."""
        plain, gpu, full = self._eligible(job)
        shape = shape_of(job)
        was_full = shape in full
        marks = [(cls, len(cls.too_big)) for cls in (*plain, *gpu)]
        saved = [(i, self.cpu[i]) for i in avoid]
        for i in avoid:
            self.cpu[i] = -1
        try:
            return self.best_node(job)
        finally:
            for i, cpu in saved:
                self.cpu[i] = cpu
            for cls, n in marks:
                del cls.too_big[n:]
            if not was_full:
                full.discard(shape)

    def place(self, i: int, job: JobSnapshot) -> tuple[str, ...]:
        """Take the job's resources on node i; the GPUs it gets (by UUID, in device order)."""
        self.cpu[i] -= job.cpu_milli
        self.mem[i] -= job.memory_bytes
        self.disk[i] -= job.disk_bytes
        kind = gpu_kind(job)
        if kind is None and i not in self.reserved:
            taken = tuple(self.gpus[i][: job.gpu_count])
            del self.gpus[i][: job.gpu_count]
        else:
            taken = tuple(self.picks(i, job.gpu_count, kind))
            self.gpus[i] = [u for u in self.gpus[i] if u not in taken]
        self.version[i] += 1
        heapq.heappush(self.node_class[i].entries, self.entry(i))
        return taken

    def fits_once_free(self, job: JobSnapshot) -> bool:
        """Whether some node the job may use has the totals for it (it fits once that node's running jobs end)."""
        plain, gpu = self.classes_for(job)
        return any(self._class_fits_once_free(cls, job) for cls in (*plain, *gpu))

    def _class_fits_once_free(self, cls: NodeClass, job: JobSnapshot) -> bool:
        if cls.totals is None:  # the distinct node sizes in the class: few, whatever the number of nodes
            cls.totals = {
                (
                    self.nodes[i].cpu_milli,
                    self.nodes[i].memory_bytes,
                    len(self.nodes[i].gpu_uuids),
                    self.nodes[i].gpu_kinds,
                    UNLIMITED if self.nodes[i].disk_bytes is None else self.nodes[i].disk_bytes,
                )
                for i in cls.members
            }
        kind = gpu_kind(job)
        ok = self.matching(kind) if kind is not None else None
        return any(
            c >= job.cpu_milli
            and m >= job.memory_bytes
            and (g if ok is None else sum(1 for k in kinds if k in ok)) >= job.gpu_count
            and d >= job.disk_bytes
            for c, m, g, kinds, d in cls.totals
        )
