"""The scheduling policy: a pure function from frozen snapshots to placements (no Django, no clock).

Filters, in the order pending reasons count them: approval, online, draining, pool and ownership,
`min_trust`, env (platform nodes only), region, `node_selector`, whole free GPUs, free CPU, memory and disk; plus
the project's concurrency quota and retry backoff on the job side. Score: capacity left after the
placement (spread); CPU-only jobs use nodes without GPUs while one fits.

Speed: nodes are not scanned per job. Nodes that share every attribute the static filters read form a
class, held in a max-heap by free capacity; a job checks the static filters once per class (cached per
eligibility key) and takes the best top of its eligible classes' heaps. A placement re-scores one node
(a new heap entry; the old one is dropped lazily by version), and a shape that found no room in a class
is remembered so that equal or larger jobs skip it. Capacity only shrinks within a pass, which keeps
both shortcuts exact. The cost per placement grows with the number of distinct node classes a job
may use, not with the number of nodes.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping

from jobs.scheduling.snapshots import (
    PLATFORM,
    POOL_OWN,
    JobSnapshot,
    NodeSnapshot,
    Placement,
    Plan,
    ProjectLimit,
)

GIB = 1024**3
UNLIMITED = 1 << 62
GPU_WEIGHT = 8.0  # a free GPU counts like 8 cores in the spread score

REASON_BACKOFF = "waiting for retry backoff"

# Static filters in reason order: (name, phrase for "N nodes ...").
_STATIC = ("approval", "online", "draining", "pool", "min_trust", "secrets", "region", "labels")
_PHRASES = {
    "approval": "are not approved",
    "online": "are offline",
    "draining": "are draining",
    "pool": "are outside the job's pool",
    "min_trust": "are below min_trust platform",
    "secrets": "are not platform nodes (the job has env)",
    "region": "are in another region",
    "labels": "lack the node_selector labels",
}


def _static_reject(node: NodeSnapshot, job: JobSnapshot) -> str | None:
    """The first static filter that removes the node for this job, or None."""
    if not node.approved:
        return "approval"
    if not node.online:
        return "online"
    if node.draining:
        return "draining"
    own = node.owner_project_id is not None and node.owner_project_id == job.project_id
    if job.pool == POOL_OWN:
        if not own:
            return "pool"
    elif not (own or node.trust == PLATFORM or (node.trust == "community" and node.public_pool)):
        return "pool"
    if job.min_trust == PLATFORM and node.trust != PLATFORM:
        return "min_trust"
    if job.needs_secrets and node.trust != PLATFORM:
        return "secrets"
    if job.region and node.region != job.region:
        return "region"
    if job.node_selector and not job.node_selector <= node.labels:
        return "labels"
    return None


def _key(job: JobSnapshot) -> tuple:
    return (job.project_id, job.region, job.node_selector, job.pool, job.min_trust, job.needs_secrets)


class _Relevant:
    """What of a node the queued jobs can tell apart: only these attributes split nodes into classes.

    A label no selector names, a region no job asks for, or an owner project with no queued job makes
    no difference to any static filter in this pass, so nodes differing only there share a class.
    """

    def __init__(self, jobs: list[JobSnapshot]) -> None:
        self.label_keys = frozenset(k for job in jobs for k, _ in job.node_selector)
        self.regions = frozenset(job.region for job in jobs if job.region)
        self.projects = frozenset(job.project_id for job in jobs)
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
            bool(node.gpu_uuids),
        )


class _Class:
    """Nodes sharing static attributes, in a max-heap by free capacity (lazy entries, checked by version)."""

    __slots__ = ("rep", "members", "entries", "too_big", "has_gpu", "explained")

    def __init__(self, rep: NodeSnapshot) -> None:
        self.rep = rep
        self.has_gpu = bool(rep.gpu_uuids)
        self.members: list[int] = []
        self.entries: list[tuple] = []
        self.too_big: list[tuple[int, int, int, int]] = []  # shapes that found no room here this pass
        self.explained: dict[tuple[int, int, int, int], dict[str, int]] = {}


class _State:
    """Free capacity per node (by index in id order), node classes, and per-job-key eligible classes."""

    def __init__(self, nodes: list[NodeSnapshot], relevant: _Relevant) -> None:
        self.nodes = nodes
        self.cpu = cpu = [n.cpu_milli - n.used_cpu_milli for n in nodes]
        self.mem = mem = [n.memory_bytes - n.used_memory_bytes for n in nodes]
        # Disk counts like memory; a node that does not report disk is not limited by it.
        self.disk = [UNLIMITED if n.disk_bytes is None else n.disk_bytes - n.used_disk_bytes for n in nodes]
        none: list[str] = []  # shared by nodes without GPUs: only ever sliced by zero
        self.gpus = gpus = [
            ([u for u in n.gpu_uuids if u not in n.used_gpus] if n.used_gpus else list(n.gpu_uuids))
            if n.gpu_uuids
            else none
            for n in nodes
        ]
        self.version = [0] * len(nodes)
        by_key: dict[tuple, _Class] = {}
        self.node_class: list[_Class] = []
        append_class, class_key = self.node_class.append, relevant.class_key
        for i, node in enumerate(nodes):
            key = class_key(node)
            cls = by_key.get(key)
            if cls is None:
                cls = by_key[key] = _Class(node)
            cls.members.append(i)
            score = cpu[i] / 1000 + mem[i] / GIB + GPU_WEIGHT * len(gpus[i])
            cls.entries.append((-score, node.id, i, 0))
            append_class(cls)
        self.classes = list(by_key.values())  # in order of their lowest node id: deterministic
        for cls in self.classes:
            heapq.heapify(cls.entries)
        self.eligible: dict[tuple, tuple[list[_Class], list[_Class]]] = {}

    def entry(self, i: int) -> tuple:
        score = self.cpu[i] / 1000 + self.mem[i] / GIB + GPU_WEIGHT * len(self.gpus[i])
        return (-score, self.nodes[i].id, i, self.version[i])

    def classes_for(self, job: JobSnapshot) -> tuple[list[_Class], list[_Class]]:
        key = _key(job)
        found = self.eligible.get(key)
        if found is None:
            plain, gpu = [], []
            for cls in self.classes:
                if _static_reject(cls.rep, job) is None:
                    (gpu if cls.has_gpu else plain).append(cls)
            found = self.eligible[key] = (plain, gpu)
        return found

    def fits(self, i: int, shape: tuple[int, int, int, int]) -> bool:
        return (
            self.cpu[i] >= shape[0]
            and self.mem[i] >= shape[1]
            and len(self.gpus[i]) >= shape[2]
            and self.disk[i] >= shape[3]
        )

    def best_in(self, cls: _Class, shape: tuple[int, int, int, int]) -> tuple | None:
        """The class's highest-scoring node with room for `shape` (left in the heap), or None."""
        for c, m, g, d in cls.too_big:
            if c <= shape[0] and m <= shape[1] and g <= shape[2] and d <= shape[3]:
                return None
        entries, aside, found = cls.entries, [], None
        while entries:
            entry = entries[0]
            if entry[3] != self.version[entry[2]]:
                heapq.heappop(entries)  # stale: the node has a newer entry
                continue
            if self.fits(entry[2], shape):
                found = entry
                break
            aside.append(heapq.heappop(entries))
        for entry in aside:
            heapq.heappush(entries, entry)
        if found is None:
            cls.too_big.append(shape)
        return found

    def take(self, classes: list[_Class], job: JobSnapshot) -> int | None:
        shape = (job.cpu_milli, job.memory_bytes, job.gpu_count, job.disk_bytes)
        best = None
        for cls in classes:
            entry = self.best_in(cls, shape)
            if entry is not None and (best is None or entry < best):
                best = entry
        return None if best is None else best[2]

    def capacity_counts(self, cls: _Class, job: JobSnapshot) -> dict[str, int]:
        """How many of the class's nodes each capacity filter removes (cached per shape within the pass)."""
        shape = (job.cpu_milli, job.memory_bytes, job.gpu_count, job.disk_bytes)
        found = cls.explained.get(shape)
        if found is None:
            found = {}
            if job.gpu_count and not cls.has_gpu:
                found["gpus"] = len(cls.members)
            else:
                for i in cls.members:
                    why = _capacity_reject(self, i, job) or "busy"
                    found[why] = found.get(why, 0) + 1
            cls.explained[shape] = found
        return found

    def place(self, i: int, job: JobSnapshot) -> tuple[str, ...]:
        self.cpu[i] -= job.cpu_milli
        self.mem[i] -= job.memory_bytes
        self.disk[i] -= job.disk_bytes
        taken = tuple(self.gpus[i][: job.gpu_count])
        del self.gpus[i][: job.gpu_count]
        self.version[i] += 1
        heapq.heappush(self.node_class[i].entries, self.entry(i))
        return taken


def _capacity_reject(state: _State, i: int, job: JobSnapshot) -> str | None:
    if len(state.gpus[i]) < job.gpu_count:  # first: the scarcest, and what a node without GPUs lacks
        return "gpus"
    if state.cpu[i] < job.cpu_milli:
        return "cpu"
    if state.mem[i] < job.memory_bytes:
        return "memory"
    if state.disk[i] < job.disk_bytes:
        return "disk"
    return None


def explain(state: _State, job: JobSnapshot) -> str:
    """Which filters removed how many nodes, e.g. "no node fits: 3 lack 2 free GPUs, 4 are in another region".

    Static filters are counted per class; only classes that pass them are scanned node by node.
    """
    if not state.nodes:
        return "no node fits: there are no nodes"
    counts: dict[str, int] = {}
    for cls in state.classes:
        why = _static_reject(cls.rep, job)
        if why is not None:
            counts[why] = counts.get(why, 0) + len(cls.members)
            continue
        for why, n in state.capacity_counts(cls, job).items():
            counts[why] = counts.get(why, 0) + n
    phrases = dict(_PHRASES)
    phrases["cpu"] = f"lack {job.cpu_milli} free millicores"
    phrases["memory"] = f"lack {job.memory_bytes} free memory bytes"
    phrases["disk"] = f"lack {job.disk_bytes} free disk bytes"
    phrases["gpus"] = f"lack {job.gpu_count} free GPU{'s' if job.gpu_count != 1 else ''}"
    phrases["busy"] = "were filled earlier in this pass"
    order = [*_STATIC, "gpus", "cpu", "memory", "disk", "busy"]
    parts = [f"{counts[name]} {phrases[name]}" for name in order if counts.get(name)]
    return "no node fits: " + ", ".join(parts)


def place(
    jobs: Iterable[JobSnapshot],
    nodes: Iterable[NodeSnapshot],
    *,
    now: float,
    projects: Mapping[int, ProjectLimit] | None = None,
) -> Plan:
    """Placements for queued jobs, oldest first; the same inputs in any order give the same plan."""
    projects = projects or {}
    jobs = sorted(jobs, key=lambda j: (j.queued_at, j.id))
    state = _State(sorted(nodes, key=lambda n: n.id), _Relevant(jobs))
    active = {pid: limit.active for pid, limit in projects.items()}
    placements: list[Placement] = []
    pending: dict[int, str] = {}
    explained: dict[tuple, str] = {}
    for job in jobs:
        if job.not_before is not None and job.not_before > now:
            pending[job.id] = REASON_BACKOFF
            continue
        limit = projects.get(job.project_id)
        if limit is not None and active[job.project_id] >= limit.max_concurrent:
            pending[job.id] = (
                f"concurrency_quota: the project runs {active[job.project_id]} of "
                f"{limit.max_concurrent} concurrent jobs"
            )
            continue
        plain, gpu = state.classes_for(job)
        i = state.take(plain, job) if job.gpu_count == 0 else None
        if i is None:
            i = state.take(gpu, job)
        if i is None:
            shape = (_key(job), job.cpu_milli, job.memory_bytes, job.gpu_count, job.disk_bytes)
            if shape not in explained:
                explained[shape] = explain(state, job)
            pending[job.id] = explained[shape]
            continue
        uuids = state.place(i, job)
        placements.append(Placement(job_id=job.id, node_id=state.nodes[i].id, gpu_uuids=uuids))
        if limit is not None:
            active[job.project_id] += 1
    return Plan(placements=tuple(placements), pending=pending)
