"""The scheduling pass: the thin DB shell around the pure policy.

One pass at a time: a Redis lock across processes (any database), and on PostgreSQL a transaction-level
advisory lock as the hard guarantee (on SQLite an IMMEDIATE transaction already serialises writers).
Queued jobs are locked with SKIP LOCKED, the allocation is summed from active attempts (never trusted
from a counter), and each batch's placements are written in one transaction; the nodes are woken after
commit. A pass asked for while another runs sets a flag that makes the running one go again.
What a pass reads is in loading.py, what a batch writes in saving.py.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count
from django.utils import timezone

from euler import metrics
from euler.prepared import Prepared
from jobs import wakeups
from jobs.models import Attempt, Job
from jobs.outputs import inputs as output_inputs
from jobs.scheduling import claims, policy, saving
from jobs.scheduling.loading import (  # noqa: F401  (re-exported: callers and tests name them through cycle)
    job_snapshot,
    node_rows,
    node_snapshots,
    project_limits,
    queued_order,
    recent_usage,
    spread_groups,
    with_usage,
)
from jobs.scheduling.snapshots import NodeSnapshot, Placement
from jobs.states import AttemptState, JobState
from jobs.wakeups import redis_key, wake_nodes

log = logging.getLogger(__name__)

ADVISORY_KEY = 0x45554C45_4A4F4253 & 0x7FFFFFFFFFFFFFFF  # "EULEJOBS"


@dataclass
class PassStats:
    placed: int = 0
    pending: int = 0
    batches: int = 0
    busy: bool = False  # another pass held the lock
    paced: bool = False  # the handover window held placements back
    preempted: int = 0  # running attempts asked to stop for higher-class jobs
    deferred: bool = False  # the queue was longer than the caller's limit: left to the worker's pass
    unlocked: bool = False  # Redis did not answer: run without its lock, and nobody told to go again

    def add(self, other: PassStats) -> None:
        self.placed += other.placed
        self.preempted += other.preempted
        self.pending += other.pending
        self.batches += other.batches
        self.busy = self.busy or other.busy
        self.paced = self.paced or other.paced
        self.deferred = self.deferred or other.deferred


def _advisory_lock() -> bool:
    if connection.vendor != "postgresql":
        return True
    with connection.cursor() as cur:
        cur.execute("SELECT pg_try_advisory_xact_lock(%s)", [ADVISORY_KEY])
        return bool(cur.fetchone()[0])


def handover_allowance() -> int | None:
    """How many attempts this pass may hand over (policy.handover_allowance); None: no limit."""
    window = settings.EULER_SCHEDULER_HANDOVER_WINDOW
    if window <= 0:
        return None
    from redis.exceptions import RedisError

    from nodes import livestore

    try:
        webs = livestore.web_processes(time.time())
    except RedisError:
        webs = 1  # the registry is unreadable: pace as for one process
    outstanding = sum(_ASSIGNED_COUNT())
    return policy.handover_allowance(window=window, web_processes=webs, outstanding=outstanding)


_ASSIGNED_COUNT = Prepared(
    lambda: (
        Attempt.objects.filter(state=AttemptState.ASSIGNED)
        .values("state")
        .annotate(n=Count("pk"))
        .values_list("n", flat=True)
    )
)


_QUEUED_LOCKED = Prepared(
    lambda ids: (
        Job.objects.select_for_update(skip_locked=True, of=("self",))
        .filter(pk__in=ids, state=JobState.QUEUED)
        .defer("env")
    )
)


@transaction.atomic
def _batch(*, now: datetime, ids: list[int], rows: dict) -> PassStats:
    """One batch in one transaction: lock its queued jobs, plan, hand over, note why the rest waits."""
    stats = PassStats(batches=1)
    if not _advisory_lock():
        stats.busy = True
        return stats
    jobs = _QUEUED_LOCKED(ids)
    if not jobs:
        return stats
    by_id = {job.pk: job for job in jobs}
    waiting = output_inputs.inputs_waiting(jobs)  # inputs_from: placed once those outputs are stored (own project)
    jobs = [job for job in jobs if job.pk not in waiting]
    if "nodes" not in rows:  # static node facts once per pass; what attempts hold is re-read every batch
        rows["nodes"], rows["stored"] = node_rows()
    nodes, stored = with_usage(rows["nodes"]), rows["stored"]
    placements, pending, decisions = _plan(jobs, nodes, now=now, rows=rows, stats=stats)
    pending.update(waiting)
    # Registered before the assignments' state broadcasts (on_commit runs in order): nodes start their work
    # first, the watchers hear of it after.
    woken: list[int] = []
    transaction.on_commit(lambda: woken and wake_nodes(woken))
    stats.placed, added = saving.assign(
        by_id, placements, {node.id: node.name for node in nodes}, now=now, nodes={node.id: node for node in nodes}
    )
    if decisions:  # after the assignments: a preemptor never stops a job that this batch placed elsewhere
        stats.preempted = claims.apply(decisions, jobs=by_id, names={node.id: node.name for node in nodes}, now=now)
    saving.save_pending(by_id, pending)
    saving.refresh_counters(nodes, stored, added)
    woken.extend(sorted(added))
    stats.pending = len(pending)
    return stats


def _plan(
    jobs: list[Job], nodes: list[NodeSnapshot], *, now: datetime, rows: dict, stats: PassStats
) -> tuple[tuple[Placement, ...], dict[int, str], tuple]:
    """The policy's placements, pending reasons and preemptions for the batch, paced by the handover window (the
    fairest first, the rest wait for nodes to start theirs). Reservations not yet used stand in later batches
    (rows["held"]), and so do the nodes that preemptors claim (rows["claims"])."""
    limits = project_limits({job.project_id for job in jobs}, now=now)
    snapshots = {job.pk: job_snapshot(job) for job in jobs}
    held = rows.setdefault("held", {})  # node id -> job: reservations of earlier batches stand in later ones
    if "claims" not in rows:
        rows["claims"], rows["guards"] = claims.standing(now=now), claims.guards()
    mine = {job_id: (node_id, n) for job_id, (node_id, n, _) in rows["claims"].items() if job_id in snapshots}
    others = {node_id: snap for job_id, (node_id, _, snap) in rows["claims"].items() if job_id not in snapshots}
    guards, running = rows["guards"], None
    if guards is not None and snapshots:
        top = max(snap.priority_value for snap in snapshots.values())
        if "lowest" not in rows:
            rows["lowest"] = claims.lowest_active_class()
        if rows["lowest"] is not None and top > rows["lowest"]:
            running = claims.running(below=top, now=now)
    plan = policy.place(
        snapshots.values(),
        nodes,
        now=now.timestamp(),
        projects=limits,
        reserve_after=settings.EULER_SCHEDULER_RESERVE_AFTER,
        held={**held, **others},
        claims=mine,
        running=running,
        guards=guards,
        groups=spread_groups(jobs),
    )
    placements, pending = plan.placements, dict(plan.pending)
    allowance = rows.get("allowance")
    if allowance is not None:
        placements, paced = placements[:allowance], placements[allowance:]
        pending.update(dict.fromkeys((p.job_id for p in paced), policy.REASON_PACED))
        rows["allowance"] = allowance - len(placements)
        stats.paced = bool(paced)
    placed = {p.job_id for p in placements}
    held.update({node_id: snapshots[job_id] for job_id, node_id in plan.reservations.items() if job_id not in placed})
    for job_id in placed & set(rows["claims"]):
        del rows["claims"][job_id]
    decisions = tuple(d for d in plan.preemptions if d.job_id not in placed)
    for d in decisions:  # held for it in the later batches of this pass (the next pass reads it back)
        rows["claims"][d.job_id] = (d.node_id, len(d.victims), snapshots[d.job_id])
    return placements, pending, decisions


def one_pass(*, now: datetime | None = None, batch: int | None = None, limit: int = 0) -> PassStats:
    """Place queued jobs in fair-share order, one transaction per batch of `batch` jobs (see queued_order); with
    `limit`, none when more than that many are queued (stats.deferred)."""
    size = batch or settings.EULER_SCHEDULER_BATCH
    stats, rows = PassStats(), {}
    started = time.perf_counter()
    order = queued_order()
    if limit and len(order) > limit:
        return PassStats(deferred=True)
    if order:
        rows["allowance"] = handover_allowance()
    for first in range(0, len(order), size):
        if first and rows["allowance"] == 0:  # the window is full: the first batch says so, the rest keep their place
            stats.paced = True
            break
        got = _batch(now=now or timezone.now(), ids=order[first : first + size], rows=rows)
        stats.add(got)
        if got.busy:
            break
    wakeups.note_paced(stats.paced)
    metrics.inc("euler_scheduling_passes_total")
    metrics.observe("euler_scheduling_pass_seconds", time.perf_counter() - started)
    if stats.placed:
        metrics.inc("euler_placements_total", stats.placed)
    return stats


def run(*, now: datetime | None = None, limit: int = 0) -> PassStats:
    """Run passes until nobody asked for another; returns at once when another process holds the pass. `limit` (a
    web process's pass on submit, jobs/wakeups.py): no pass over a queue longer than that; the request stands for
    the worker's."""
    import redis

    from euler.redis import client

    stats = PassStats()
    try:
        r = client()
        pipe = r.pipeline(transaction=False)  # one round trip
        if not limit:
            pipe.delete(redis_key("requested"))  # from here on, a new request enqueues a new task (see wakeups)
        pipe.set(redis_key("dirty"), 1)
        pipe.execute()
        while True:
            lock = r.lock(redis_key("lock"), timeout=120, blocking=False)
            if not lock.acquire(blocking=False):
                stats.busy = True
                return stats  # the holder sees the flag and goes again
            try:
                while r.delete(redis_key("dirty")):
                    stats.add(one_pass(now=now, limit=limit))
                    if stats.deferred:
                        r.set(redis_key("dirty"), 1)  # still asked for: the worker's task places them
                        return stats
            finally:
                try:
                    lock.release()
                except redis.exceptions.LockError:
                    log.warning("scheduler lock expired during a pass")
            if not r.exists(redis_key("dirty")):
                return stats
    except redis.exceptions.RedisError as exc:
        log.warning("scheduler runs without its Redis lock: %s", type(exc).__name__)
        stats.add(one_pass(now=now, limit=limit))
        stats.unlocked = True
        return stats
