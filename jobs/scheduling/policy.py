"""The scheduling policy: a pure function from frozen snapshots to placements (no Django, no clock).

`place()` composes the pieces, each a pure module of its own:

- filters.py: which nodes a job may use (approval, online, draining, pool and ownership, `min_trust`, env,
  region, `node_selector`, egress, the lender's allowed images; then whole free GPUs, CPU, memory and disk), each filter naming its reason;
- scores.py: which of those it takes (spread; CPU-only jobs keep off GPU nodes while one fits);
- capacity.py: free capacity per node, in classes of alike nodes, so that a job does not scan every node;
- fairshare.py: whose turn it is (weighted DRF across projects; priority, then FIFO, within one);
- reservations.py: starved jobs hold the node they fit best;
- reasons.py: the pending reason of every job that stays queued.

On the job side: the project's concurrency quota and retry backoff. The same inputs in any order give the
same plan.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from operator import attrgetter

from jobs.scheduling import fairshare, preemption, reasons, reservations, spread
from jobs.scheduling.capacity import UNLIMITED, Capacity, Relevant, eligibility_key, shape_of
from jobs.scheduling.filters import static_reject
from jobs.scheduling.gpufit import Reservation
from jobs.scheduling.pacing import handover_allowance
from jobs.scheduling.reasons import REASON_BACKOFF, REASON_PACED, explain
from jobs.scheduling.scores import GIB, GPU_WEIGHT
from jobs.scheduling.snapshots import JobSnapshot, NodeSnapshot, Placement, Plan, ProjectLimit
from jobs.scheduling.victims import Guards, Running

__all__ = [
    "GIB",
    "GPU_WEIGHT",
    "REASON_BACKOFF",
    "REASON_PACED",
    "UNLIMITED",
    "explain",
    "handover_allowance",
    "place",
]


def place(
    jobs: Iterable[JobSnapshot],
    nodes: Iterable[NodeSnapshot],
    *,
    now: float,
    projects: Mapping[int, ProjectLimit] | None = None,
    reserve_after: float | None = None,
    held: Mapping[int, JobSnapshot] | None = None,
    claims: Mapping[int, tuple[int, int]] | None = None,
    running: Iterable[Running] | None = None,
    guards: Guards | None = None,
    groups: Mapping[str, Iterable[int]] | None = None,
) -> Plan:
    """Placements for queued jobs, priority classes strictly in order (highest value first), and within a class in
    weighted fair-share order (priority, then FIFO, within a project); `reserve_after` (seconds; None: no
    reservations) lets starved jobs reserve nodes. `held`: node id -> the job an earlier batch of the same pass
    reserved it for (not among `jobs`); those reservations stand here too. `claims`: job id -> (node id, victims
    still stopping): the node a preemptor holds while its victims stop. With `running` (the active attempts) and
    `guards`, jobs of a higher class that found no room preempt (Plan.preemptions, preemption.py). `groups`: spread
    group -> the node ids its active jobs hold (jobs/scheduling/spread.py).
    The same inputs in any order give the same plan."""
    projects = projects or {}
    jobs = sorted(jobs, key=_own_order)
    state = Capacity(sorted(nodes, key=attrgetter("id")), Relevant(jobs))
    tiers: dict[int, dict[int, list[JobSnapshot]]] = {}
    for job in jobs:
        tiers.setdefault(job.priority_value, {}).setdefault(job.project_id, []).append(job)
    shares = fairshare.project_shares({job.project_id for job in jobs}, projects, state.nodes)
    if held:
        reservations.hold(state, held)
    run = _Pass(state, projects, now=now, reserve_after=reserve_after)
    run.groups = {group: set(ids) for group, ids in (groups or {}).items()}
    if claims:
        run.claim(jobs, claims)
    for value in sorted(tiers, reverse=True):  # classes strictly in order: a lower one takes what is left
        queues = tiers[value]
        entitled = fairshare.entitlements({pid: shares[pid].weight for pid in queues})
        if reserve_after is not None:
            run.reserved.update(
                reservations.reserve(
                    state, queues, shares, entitled, projects, now=now, reserve_after=reserve_after,
                    taken=run.reserved,
                )
            )  # fmt: skip
        run.tier(queues, shares, entitled)
    if running is not None:
        waiting = sorted(run.no_room, key=lambda j: (-j.priority_value, shares[j.project_id].share, j.queued_at, j.id))
        decided, preempting = preemption.decide(state, waiting, running, now=now, guards=guards or Guards())
        return run.plan(shares, tuple(decided), preempting)
    return run.plan(shares)


def _own_order(job: JobSnapshot) -> tuple:
    """The classes highest first, then the projects' own queues one after the other: higher priority first, then
    first in, first out."""
    return (-job.priority_value, job.project_id, -job.priority, job.queued_at, job.id)


class _Pass:
    """One pass's progress: each project's place in its queue, what was placed, and why the rest waits."""

    def __init__(
        self, state: Capacity, projects: Mapping[int, ProjectLimit], *, now: float, reserve_after: float | None
    ) -> None:
        self.state, self.projects, self.now = state, projects, now
        self.reserved: dict[int, int] = {}  # job id -> the node index it reserved (or claimed by preempting)
        self.reserve_after = reserve_after
        self.claims: dict[int, int] = {}  # preemptor's job id -> its victims still stopping
        self.queues: dict[int, list[JobSnapshot]] = {}  # the class being placed: its projects' queues
        self.cursor: dict[int, int] = {}
        self.active = {pid: limit.active for pid, limit in projects.items()}
        self.placements: list[Placement] = []
        self.pending: dict[int, str] = {}
        # No room: (job, reason, fits once nodes free up, its project's entitlement in its class, class contended)
        self.waiting: list[tuple[JobSnapshot, str, bool, float, bool]] = []
        self.no_room: list[JobSnapshot] = []  # jobs that would fit once nodes free up: they may preempt
        self.explained: dict[tuple, tuple[str, bool]] = {}  # per eligibility key and shape
        self.entitled: dict[int, float] = {}
        self.groups: dict[str, set[int]] = {}  # spread group -> node ids its jobs hold, placements of this pass too

    def claim(self, jobs: list[JobSnapshot], claims: Mapping[int, tuple[int, int]]) -> None:
        """Hold each claimed node for its preemptor (a reservation it consumes when it fits there), while the job may
        still use it."""
        index = {node.id: i for i, node in enumerate(self.state.nodes)}
        for job in jobs:
            found = claims.get(job.id)
            i = index.get(found[0]) if found is not None else None
            # A node that went offline, draining or out of the job's reach since the claim holds nothing for it.
            if i is not None and i not in self.state.reserved and static_reject(self.state.nodes[i], job) is None:
                self.state.reserved[i] = Reservation(job)
                self.reserved[job.id] = i
                self.claims[job.id] = found[1]

    def tier(
        self, queues: dict[int, list[JobSnapshot]], shares: dict[int, fairshare.ProjectShare], entitled: dict
    ) -> None:
        """Place one class's jobs: each placement goes to the project with the lowest share, recomputed after it."""
        self.queues, self.cursor, self.entitled = queues, dict.fromkeys(queues, 0), entitled
        self.contended = len(queues) > 1
        turns = fairshare.Turns(queues, shares)
        pid = turns.next()
        while pid is not None:
            following = self.turn(pid, shares[pid])
            pid = turns.next(pid, shares[pid].share, following)

    def turn(self, pid: int, share: fairshare.ProjectShare) -> JobSnapshot | None:
        """Place the project's next job that can start now (the jobs it passes get their reason), and count it in
        its share. Returns the job after it, with which the project competes again; None: its turn is over."""
        queue, k, now = self.queues[pid], self.cursor[pid], self.now
        limit = self.projects.get(pid)
        capped = limit is not None and limit.max_concurrent is not None
        while k < len(queue):
            job = queue[k]
            k += 1
            if job.not_before is not None and job.not_before > now:
                self.pending[job.id] = REASON_BACKOFF
                continue
            if capped and self.active[pid] >= limit.max_concurrent:
                self._capped(queue[k - 1 :], self.active[pid], limit.max_concurrent)
                k = len(queue)
                break
            i = self._node_for(job)
            if i is not None:
                uuids = self.state.place(i, job)
                self.placements.append(Placement(job.id, self.state.nodes[i].id, uuids))  # positional: faster
                if job.spread_group:
                    self.groups.setdefault(job.spread_group, set()).add(self.state.nodes[i].id)
                if limit is not None:
                    self.active[pid] += 1
                share.add(job)
                self.cursor[pid] = k
                return queue[k] if k < len(queue) else None
        self.cursor[pid] = k
        return None

    def _capped(self, rest: list[JobSnapshot], active: int, cap: int) -> None:
        """The project runs as many jobs as its quota allows: the rest of its queue waits for that (or backoff)."""
        reason = reasons.concurrency_quota(active, cap)
        for job in rest:
            waits = job.not_before is not None and job.not_before > self.now
            self.pending[job.id] = REASON_BACKOFF if waits else reason

    def _node_for(self, job: JobSnapshot) -> int | None:
        """The node index the job takes now; None once its reason is noted."""
        mine = self.reserved.get(job.id) if self.reserved else None
        if mine is None:
            i = self._spread_node(job) if job.spread_group else None
            if i is None:
                i = self.state.best_node(job)
            if i is None:
                self._no_room(job)
            return i
        if not self.state.fits(mine, shape_of(job)):
            name = self.state.nodes[mine].name
            stopping = self.claims.get(job.id)
            busy = reasons.preempting(stopping, name) if stopping else reasons.reserved_node_busy(name)
            self.pending[job.id] = busy
            return None
        del self.state.reserved[mine]  # consumed by this placement: others may take exactly what they could
        return mine

    def _spread_node(self, job: JobSnapshot) -> int | None:
        """A node away from the job's group (other lenders first, then other nodes), or None: any node will do."""
        for avoid in spread.avoid_tiers(self.groups.get(job.spread_group, ()), self.state.nodes):
            i = self.state.best_node_avoiding(job, avoid)
            if i is not None:
                return i
        return None

    def _no_room(self, job: JobSnapshot) -> None:
        """Why no node took the job: reservations in the way, else the filters (the fair share is settled last)."""
        state = self.state
        blocked = reservations.blocking(state, job, self.reserve_after) if state.reserved else None
        if blocked is not None:
            self.pending[job.id] = blocked
            return
        key = (eligibility_key(job), *shape_of(job))
        found = self.explained.get(key)
        if found is None:
            found = self.explained[key] = (explain(state, job), state.fits_once_free(job))
        self.waiting.append((job, *found, self.entitled[job.project_id], self.contended))
        if found[1]:
            self.no_room.append(job)

    def plan(
        self, shares: dict[int, fairshare.ProjectShare], preemptions: tuple = (), preempting: Mapping[int, str] = {}
    ) -> Plan:
        """The pass's plan; a job that would fit once nodes free up, of a project above its share within its class,
        waits for that (unless it preempts)."""
        for job, reason, later, entitled, contended in self.waiting:
            share = shares[job.project_id]
            if contended and later and share.above(entitled):
                reason = reasons.fair_share(share.holds(), share.weight)
            self.pending[job.id] = reason
        self.pending.update(preempting)
        state = self.state
        return Plan(
            placements=tuple(self.placements),
            pending=self.pending,
            reservations={
                job_id: state.nodes[i].id for job_id, i in self.reserved.items() if job_id not in self.claims
            },
            shares={pid: s.share for pid, s in shares.items()},
            preemptions=preemptions,
        )
