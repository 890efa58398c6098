"""The scheduling policy: a pure function from frozen snapshots to placements (no Django, no clock).

Filters, in the order pending reasons count them: approval, online, draining, pool and ownership,
`min_trust`, env (platform nodes only), region, `node_selector`, egress (a node whose egress rules are not
installed refuses jobs with a network), image (the lender's allowed images), whole free GPUs, free CPU, memory and disk; plus
the project's concurrency quota and retry backoff on the job side. Score: capacity left after the
placement (spread); CPU-only jobs use nodes without GPUs while one fits.

Speed: nodes are not scanned per job. Nodes that share every attribute the static filters read form a
class, held in a max-heap by free capacity; a job checks the static filters once per class (cached per
eligibility key) and takes the best top of its eligible classes' heaps. A placement re-scores one node
(a new heap entry; the old one is dropped lazily by version), and a shape that found no room in a class
is remembered so that equal or larger jobs skip it. Capacity only shrinks within a pass, which keeps
both shortcuts exact. The cost per placement grows with the number of distinct node classes a job
may use, not with the number of nodes.

Order: weighted fair share across projects on the dominant resource (see fairshare.py): each placement goes
to the next job of the project with the lowest share, recomputed after every placement; within a project,
`priority` (higher first), then FIFO. Reservations: a job that has waited `reserve_after` seconds reserves the
node it fits best (now, or once that node's running jobs end), while its project holds no more than its
weighted fair share; later jobs may not take capacity there that the reserved job needs. At most one
reservation per project and per node in a pass, so a backlog cannot fence off the pool.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping

from jobs.scheduling import fairshare
from jobs.scheduling.snapshots import (
    PLATFORM,
    POOL_OWN,
    JobSnapshot,
    NodeSnapshot,
    Placement,
    Plan,
    ProjectLimit,
)
from nodeagent.imageref import allowed_by

GIB = 1024**3
UNLIMITED = 1 << 62
GPU_WEIGHT = 8.0  # a free GPU counts like 8 cores in the spread score

REASON_BACKOFF = "waiting for retry backoff"
REASON_PACED = (
    "waiting for nodes to start the attempts already handed to them "
    "(the scheduler paces handovers: EULER_SCHEDULER_HANDOVER_WINDOW)"
)

# Static filters in reason order: (name, phrase for "N nodes ...").
_STATIC = ("approval", "online", "draining", "pool", "min_trust", "secrets", "region", "labels", "egress", "image")
_PHRASES = {
    "approval": "are not approved",
    "online": "are offline",
    "draining": "are draining",
    "pool": "are outside the job's pool",
    "min_trust": "are below min_trust platform",
    "secrets": "are not platform nodes (the job has env)",
    "region": "are in another region",
    "labels": "lack the node_selector labels",
    "egress": 'refuse networked jobs (egress rules not installed; network "none" jobs fit)',
    "image": "do not allow the job's image (their lenders' EULER_NODE_ALLOWED_IMAGES)",
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
    elif not (own or node.shared):
        return "pool"
    if job.min_trust == PLATFORM and node.trust != PLATFORM:
        return "min_trust"
    if job.needs_secrets and node.trust != PLATFORM:
        return "secrets"
    if job.region and node.region != job.region:
        return "region"
    if job.node_selector and not job.node_selector <= node.labels:
        return "labels"
    if job.networked and not node.runs_networked:
        return "egress"
    if node.image_patterns and not allowed_by(job.image, node.image_patterns):
        return "image"
    return None


def _key(job: JobSnapshot) -> tuple:
    return (
        job.project_id,
        job.region,
        job.node_selector,
        job.pool,
        job.min_trust,
        job.needs_secrets,
        job.networked,
        job.image,
    )


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
            node.runs_networked,
            node.image_patterns,
            bool(node.gpu_uuids),
        )


class _Class:
    """Nodes sharing static attributes, in a max-heap by free capacity (lazy entries, checked by version)."""

    __slots__ = ("rep", "members", "entries", "too_big", "has_gpu", "explained", "totals")

    def __init__(self, rep: NodeSnapshot) -> None:
        self.rep = rep
        self.has_gpu = bool(rep.gpu_uuids)
        self.members: list[int] = []
        self.entries: list[tuple] = []
        self.too_big: list[tuple[int, int, int, int]] = []  # shapes that found no room here this pass
        self.explained: dict[tuple[int, int, int, int], dict[str, int]] = {}
        self.totals: set[tuple[int, int, int, int]] | None = None


class _Reservation:
    __slots__ = ("job", "cpu", "mem", "gpus", "disk")

    def __init__(self, job: JobSnapshot) -> None:
        self.job = job
        self.cpu, self.mem, self.gpus = job.cpu_milli, job.memory_bytes, job.gpu_count
        self.disk = job.disk_bytes


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
        self.reserved: dict[int, _Reservation] = {}  # node index -> the job it is held for

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

    def allowed(self, i: int, shape: tuple[int, int, int, int]) -> bool:
        """Whether taking `shape` on node i leaves what its reservation needs of every resource it takes.

        Monotone in the shape, like fits(): the too-big shortcut stays exact on reserved nodes.
        """
        r = self.reserved.get(i)
        if r is None:
            return True
        return (
            (not shape[0] or self.cpu[i] - shape[0] >= r.cpu)
            and (not shape[1] or self.mem[i] - shape[1] >= r.mem)
            and (not shape[2] or len(self.gpus[i]) - shape[2] >= r.gpus)
            and (not shape[3] or self.disk[i] - shape[3] >= r.disk)
        )

    def reservable(self, classes: list[_Class], job: JobSnapshot) -> int | None:
        """The unreserved node the job fits once its running jobs end that lacks the least now (then the
        emptiest, then the lowest id), or None."""
        best, found = None, None
        for cls in classes:
            for i in cls.members:
                node = self.nodes[i]
                if i in self.reserved or node.cpu_milli < job.cpu_milli or node.memory_bytes < job.memory_bytes:
                    continue
                if len(node.gpu_uuids) < job.gpu_count or (
                    node.disk_bytes is not None and node.disk_bytes < job.disk_bytes
                ):
                    continue
                short = (
                    max(0, job.cpu_milli - self.cpu[i]) / 1000
                    + max(0, job.memory_bytes - self.mem[i]) / GIB
                    + GPU_WEIGHT * max(0, job.gpu_count - len(self.gpus[i]))
                )
                key = (short, self.entry(i)[:2])
                if best is None or key < best:
                    best, found = key, i
        return found

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
            if self.fits(entry[2], shape) and (not self.reserved or self.allowed(entry[2], shape)):
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


def _fits_once_free(state: _State, cls: _Class, job: JobSnapshot) -> bool:
    """Whether some node of the class has the totals for the job (it fits once that node's running jobs end)."""
    if cls.totals is None:  # the distinct node sizes in the class: few, whatever the number of nodes
        cls.totals = {
            (
                state.nodes[i].cpu_milli,
                state.nodes[i].memory_bytes,
                len(state.nodes[i].gpu_uuids),
                UNLIMITED if state.nodes[i].disk_bytes is None else state.nodes[i].disk_bytes,
            )
            for i in cls.members
        }
    return any(
        c >= job.cpu_milli and m >= job.memory_bytes and g >= job.gpu_count and d >= job.disk_bytes
        for c, m, g, d in cls.totals
    )


class _Fair:
    """A project's weight, holdings (this pass's placements added), the capacity it may use, and its share."""

    __slots__ = ("weight", "held", "recent", "capacity", "dominant", "share")

    def __init__(self, limit: ProjectLimit | None, capacity: fairshare.Vector) -> None:
        self.weight = limit.weight if limit is not None and limit.weight > 0 else 1.0
        self.held = list(limit.held) if limit is not None else [0.0, 0.0, 0.0]
        self.recent = limit.recent if limit is not None else None
        self.capacity = capacity
        self.update()

    def update(self) -> None:
        counted = fairshare.blended((self.held[0], self.held[1], self.held[2]), self.recent)
        self.dominant = fairshare.dominant(counted, self.capacity)[0]
        self.share = self.dominant / self.weight

    def add(self, job: JobSnapshot) -> None:
        held = self.held
        held[0] += job.cpu_milli
        held[1] += job.memory_bytes
        held[2] += job.gpu_count
        if self.recent is not None:
            self.update()
            return
        cap = self.capacity  # fairshare.dominant inlined: this runs once per placement
        d = held[0] / cap[0] if cap[0] > 0 else 0.0
        if cap[1] > 0 and held[1] / cap[1] > d:
            d = held[1] / cap[1]
        if cap[2] > 0 and held[2] / cap[2] > d:
            d = held[2] / cap[2]
        self.dominant, self.share = d, d / self.weight

    def holds(self) -> float:
        """The fraction of its capacity the project holds now (the dominant resource, unweighted, no history)."""
        return fairshare.dominant((self.held[0], self.held[1], self.held[2]), self.capacity)[0]


def _order(job: JobSnapshot) -> tuple:
    """A project's own queue: higher priority first, then first in, first out."""
    return (-job.priority, job.queued_at, job.id)


def _at_cap(limit: ProjectLimit | None, active: int) -> bool:
    return limit is not None and limit.max_concurrent is not None and active >= limit.max_concurrent


def _reserve(
    state: _State,
    queues: dict[int, list[JobSnapshot]],
    fair: dict[int, _Fair],
    entitled: dict[int, float],
    projects: Mapping[int, ProjectLimit],
    *,
    now: float,
    reserve_after: float,
) -> dict[int, int]:
    """Before any placement: each project at or below its weighted fair share lets its first job (in its own
    order) that has waited longer than `reserve_after` reserve a node: the best that fits now, else the one
    it fits once the running jobs end that lacks the least. Projects go lowest share first; one per node."""
    reserved: dict[int, int] = {}
    for pid in sorted(queues, key=lambda p: (fair[p].share, _order(queues[p][0])[1:], p)):
        limit = projects.get(pid)
        if fair[pid].dominant > entitled[pid] + 1e-9 or _at_cap(limit, limit.active if limit else 0):
            continue  # over its fair share it waits for that, not starved; at its cap it cannot start anyway
        job = next(
            (
                j
                for j in queues[pid]
                if now - j.queued_at > reserve_after and (j.not_before is None or j.not_before <= now)
            ),
            None,
        )
        if job is None:
            continue
        plain, gpu = state.classes_for(job)
        i = state.reservable(plain, job) if job.gpu_count == 0 else None
        if i is None:
            i = state.reservable(gpu, job)
        if i is not None:
            state.reserved[i] = _Reservation(job)
            reserved[job.id] = i
    return reserved


def _blocking_reservations(state: _State, job: JobSnapshot, reserve_after: float | None) -> str | None:
    """ "node X reserved for an older job" when the job found no room but would fit where a reservation holds."""
    shape = (job.cpu_milli, job.memory_bytes, job.gpu_count, job.disk_bytes)
    names, older = [], True
    for i, r in sorted(state.reserved.items()):
        if r.job.id != job.id and state.fits(i, shape) and _static_reject(state.nodes[i], job) is None:
            names.append(state.nodes[i].name or f"#{state.nodes[i].id}")
            older = older and (r.job.queued_at, r.job.id) < (job.queued_at, job.id)
    if not names:
        return None
    whom = "an older job" if older else f"a job that has waited over {reserve_after or 0:g} s"
    if len(names) == 1:
        return f"node {names[0]} reserved for {whom}"
    shown = ", ".join(names[:3]) + (", …" if len(names) > 3 else "")
    whom = "older jobs" if older else f"jobs that have waited over {reserve_after or 0:g} s"
    return f"{len(names)} nodes reserved for {whom} ({shown})"


def handover_allowance(*, window: int, web_processes: int, outstanding: int) -> int | None:
    """How many attempts a scheduling pass may hand over now; None: no limit (`window` 0).

    Handed over but not started, an attempt still costs the web tier its wake-up, its poll answer and its start
    report, and a finished one its end report: placing a 20,000-job queue on 10,000 idle nodes at once would
    queue that work, and the nodes' heartbeats behind it, faster than the web processes answer. So at most
    `window` attempts per live web process are handed over and not yet started; each start frees a place. The
    pace thus follows what the web tier actually answers (a slower tier starts attempts later), like a
    sliding window."""
    if window <= 0:
        return None
    return max(0, window * max(web_processes, 1) - outstanding)


def place(
    jobs: Iterable[JobSnapshot],
    nodes: Iterable[NodeSnapshot],
    *,
    now: float,
    projects: Mapping[int, ProjectLimit] | None = None,
    reserve_after: float | None = None,
    held: Mapping[int, JobSnapshot] | None = None,
) -> Plan:
    """Placements for queued jobs in weighted fair-share order (priority, then FIFO, within a project);
    `reserve_after` (seconds; None: no reservations) lets starved jobs reserve nodes. `held`: node id -> the
    job an earlier batch of the same pass reserved it for (not among `jobs`); those reservations stand here too.
    The same inputs in any order give the same plan."""
    projects = projects or {}
    jobs = sorted(jobs, key=lambda j: (j.project_id, -j.priority, j.queued_at, j.id))  # projects' own order
    state = _State(sorted(nodes, key=lambda n: n.id), _Relevant(jobs))
    queues: dict[int, list[JobSnapshot]] = {}
    for job in jobs:
        queues.setdefault(job.project_id, []).append(job)
    shared, own = fairshare.pool_capacity(state.nodes)
    fair = {pid: _Fair(projects.get(pid), fairshare.capacity_for(pid, shared, own)) for pid in queues}
    entitled = fairshare.entitlements({pid: f.weight for pid, f in fair.items()})
    if held:
        index = {node.id: i for i, node in enumerate(state.nodes)}
        for node_id, job in held.items():
            if node_id in index:
                state.reserved[index[node_id]] = _Reservation(job)
    reservations: dict[int, int] = {}
    if reserve_after is not None:
        reservations = _reserve(state, queues, fair, entitled, projects, now=now, reserve_after=reserve_after)
    active = {pid: limit.active for pid, limit in projects.items()}
    placements: list[Placement] = []
    pending: dict[int, str] = {}
    explained: dict[tuple, tuple[str, bool]] = {}
    waiting: list[tuple[JobSnapshot, str, bool]] = []  # found no room: (job, reason, fits once nodes free up)
    cursor = dict.fromkeys(queues, 0)
    heap = [(fair[pid].share, queue[0].queued_at, queue[0].id, pid) for pid, queue in queues.items()]
    heapq.heapify(heap)
    current = heapq.heappop(heap) if heap else None
    while current is not None:  # each placement goes to the project with the lowest share, recomputed after it
        pid = current[3]
        current = None
        queue, limit, k = queues[pid], projects.get(pid), cursor[pid]
        capped = limit is not None and limit.max_concurrent is not None
        while k < len(queue):
            job = queue[k]
            k += 1
            if job.not_before is not None and job.not_before > now:
                pending[job.id] = REASON_BACKOFF
                continue
            if capped and active[pid] >= limit.max_concurrent:
                reason = f"concurrency_quota: the project runs {active[pid]} of {limit.max_concurrent} concurrent jobs"
                for rest in queue[k - 1 :]:
                    waits = rest.not_before is not None and rest.not_before > now
                    pending[rest.id] = REASON_BACKOFF if waits else reason
                k = len(queue)
                break
            mine = reservations.get(job.id) if reservations else None
            if mine is not None:
                i = mine if state.fits(mine, (job.cpu_milli, job.memory_bytes, job.gpu_count, job.disk_bytes)) else None
                if i is None:
                    pending[job.id] = f"reserved node {state.nodes[mine].name}: waiting for its running jobs to end"
                    continue
                del state.reserved[i]  # consumed by this placement: others may take exactly what they could
            else:
                plain, gpu = state.classes_for(job)
                i = state.take(plain, job) if job.gpu_count == 0 else None
                if i is None:
                    i = state.take(gpu, job)
            if i is None:
                blocked = _blocking_reservations(state, job, reserve_after) if state.reserved else None
                if blocked is not None:
                    pending[job.id] = blocked
                    continue
                shape = (_key(job), job.cpu_milli, job.memory_bytes, job.gpu_count, job.disk_bytes)
                if shape not in explained:
                    plain, gpu = state.classes_for(job)
                    later = any(_fits_once_free(state, cls, job) for cls in (*plain, *gpu))
                    explained[shape] = (explain(state, job), later)
                waiting.append((job, *explained[shape]))
                continue
            uuids = state.place(i, job)
            placements.append(Placement(job_id=job.id, node_id=state.nodes[i].id, gpu_uuids=uuids))
            if limit is not None:
                active[pid] += 1
            fair[pid].add(job)
            if k < len(queue):  # stays current while it is still the lowest: no heap work then
                current = heapq.heappushpop(heap, (fair[pid].share, queue[k].queued_at, queue[k].id, pid))
            break
        cursor[pid] = k
        if current is None and heap:
            current = heapq.heappop(heap)
    contended = len(queues) > 1
    for job, reason, later in waiting:
        f = fair[job.project_id]
        if contended and later and f.dominant > entitled[job.project_id] + 1e-9:
            # Capacity it could use exists but is held: it waits because its project holds more than its share.
            reason = (
                f"waiting for its fair share (project holds {f.holds():.0%} of eligible capacity, weight {f.weight:g})"
            )
        pending[job.id] = reason
    return Plan(
        placements=tuple(placements),
        pending=pending,
        reservations={job_id: state.nodes[i].id for job_id, i in reservations.items()},
        shares={pid: f.share for pid, f in fair.items()},
    )
