"""The scheduling policy: a pure function from frozen snapshots to placements (no Django, no clock).

Filters, in the order pending reasons count them: approval, online, draining, pool and ownership,
`min_trust`, env (platform nodes only), region, `node_selector`, free CPU, memory and whole GPUs; plus
the project's concurrency quota and retry backoff on the job side. Score: capacity left after the
placement (spread); CPU-only jobs use nodes without GPUs while one fits.

Speed: nodes are not scanned per job. Jobs that share an eligibility key (project, region, selector,
pool, trust, env) share two max-heaps of eligible nodes (with and without GPUs) ordered by free
capacity; a placement re-scores one node (lazy re-push by version), and a shape that found no room is
remembered so that equal or larger jobs of that key skip the scan. Capacity only shrinks within a pass,
which keeps both shortcuts exact.
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


class _Heap:
    __slots__ = ("entries", "pushed", "too_big")

    def __init__(self, entries: list) -> None:
        heapq.heapify(entries)
        self.entries = entries
        self.pushed: dict[int, int] = {}  # node index -> version of its newest entry here
        self.too_big: list[tuple[int, int, int]] = []  # shapes that found no room in this heap


class _State:
    """Free capacity per node (by index in id order), with versions for lazy heap entries."""

    def __init__(self, nodes: list[NodeSnapshot]) -> None:
        self.nodes = nodes
        self.cpu = [n.cpu_milli - n.used_cpu_milli for n in nodes]
        self.mem = [n.memory_bytes - n.used_memory_bytes for n in nodes]
        self.gpus = [[u for u in n.gpu_uuids if u not in n.used_gpus] for n in nodes]
        self.version = [0] * len(nodes)
        self.heaps: dict[tuple, tuple[_Heap, _Heap]] = {}

    def entry(self, i: int) -> tuple:
        score = self.cpu[i] / 1000 + self.mem[i] / GIB + GPU_WEIGHT * len(self.gpus[i])
        return (-score, self.nodes[i].id, i, self.version[i])

    def heaps_for(self, job: JobSnapshot) -> tuple[_Heap, _Heap]:
        key = _key(job)
        found = self.heaps.get(key)
        if found is None:
            plain, gpu = [], []
            for i, node in enumerate(self.nodes):
                if _static_reject(node, job) is None:
                    (gpu if node.gpu_uuids else plain).append(self.entry(i))
            found = self.heaps[key] = (_Heap(plain), _Heap(gpu))
        return found

    def take(self, heap: _Heap, job: JobSnapshot) -> int | None:
        shape = (job.cpu_milli, job.memory_bytes, job.gpu_count)
        for c, m, g in heap.too_big:
            if c <= shape[0] and m <= shape[1] and g <= shape[2]:
                return None
        entries, aside, found = heap.entries, [], None
        while entries:
            entry = heapq.heappop(entries)
            i = entry[2]
            if entry[3] != self.version[i]:
                if heap.pushed.get(i) != self.version[i]:  # re-score it once, lower down
                    heap.pushed[i] = self.version[i]
                    heapq.heappush(entries, self.entry(i))
                continue
            if self.cpu[i] >= shape[0] and self.mem[i] >= shape[1] and len(self.gpus[i]) >= shape[2]:
                found = i
                break
            aside.append(entry)
        for entry in aside:
            heapq.heappush(entries, entry)
        if found is None:
            heap.too_big.append(shape)
        return found

    def place(self, heap: _Heap, i: int, job: JobSnapshot) -> tuple[str, ...]:
        self.cpu[i] -= job.cpu_milli
        self.mem[i] -= job.memory_bytes
        taken = tuple(self.gpus[i][: job.gpu_count])
        del self.gpus[i][: job.gpu_count]
        self.version[i] += 1
        heap.pushed[i] = self.version[i]
        heapq.heappush(heap.entries, self.entry(i))
        return taken


def _capacity_reject(state: _State, i: int, job: JobSnapshot) -> str | None:
    if state.cpu[i] < job.cpu_milli:
        return "cpu"
    if state.mem[i] < job.memory_bytes:
        return "memory"
    if len(state.gpus[i]) < job.gpu_count:
        return "gpus"
    return None


def explain(state: _State, job: JobSnapshot) -> str:
    """Which filters removed how many nodes, e.g. "no node fits: 3 lack 2 free GPUs, 4 are in another region"."""
    if not state.nodes:
        return "no node fits: there are no nodes"
    counts: dict[str, int] = {}
    for i, node in enumerate(state.nodes):
        why = _static_reject(node, job) or _capacity_reject(state, i, job) or "busy"
        counts[why] = counts.get(why, 0) + 1
    phrases = dict(_PHRASES)
    phrases["cpu"] = f"lack {job.cpu_milli} free millicores"
    phrases["memory"] = f"lack {job.memory_bytes} free memory bytes"
    phrases["gpus"] = f"lack {job.gpu_count} free GPU{'s' if job.gpu_count != 1 else ''}"
    phrases["busy"] = "were filled earlier in this pass"
    order = [*_STATIC, "cpu", "memory", "gpus", "busy"]
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
    state = _State(sorted(nodes, key=lambda n: n.id))
    active = {pid: limit.active for pid, limit in projects.items()}
    placements: list[Placement] = []
    pending: dict[int, str] = {}
    explained: dict[tuple, str] = {}
    for job in sorted(jobs, key=lambda j: (j.queued_at, j.id)):
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
        plain, gpu = state.heaps_for(job)
        heap, i = gpu, None
        if job.gpu_count == 0:
            heap, i = plain, state.take(plain, job)
            if i is None:
                heap = gpu
        if i is None:
            i = state.take(gpu, job)
        if i is None:
            shape = (_key(job), job.cpu_milli, job.memory_bytes, job.gpu_count)
            if shape not in explained:
                explained[shape] = explain(state, job)
            pending[job.id] = explained[shape]
            continue
        uuids = state.place(heap, i, job)
        placements.append(Placement(job_id=job.id, node_id=state.nodes[i].id, gpu_uuids=uuids))
        if limit is not None:
            active[job.project_id] += 1
    return Plan(placements=tuple(placements), pending=pending)
