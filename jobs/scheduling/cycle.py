"""The scheduling pass: the thin DB shell around the pure policy.

One pass at a time: a Redis lock across processes (any database), and on PostgreSQL a transaction-level
advisory lock as the hard guarantee (on SQLite an IMMEDIATE transaction already serialises writers).
Queued jobs are locked with SKIP LOCKED, the allocation is summed from active attempts (never trusted
from a counter), and each batch's placements are written in one transaction; the nodes are woken after
commit. A pass asked for while another runs sets a flag that makes the running one go again.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, F, Sum, Window
from django.db.models.functions import RowNumber
from django.utils import timezone

from euler import metrics
from jobs import transitions, wakeups
from jobs.models import Attempt, Job
from jobs.scheduling import fairshare, policy
from jobs.scheduling.snapshots import JobSnapshot, NodeSnapshot, ProjectLimit
from jobs.states import ACTIVE, ATTEMPT_ACTIVE, AttemptState, JobState, Network
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

    def add(self, other: PassStats) -> None:
        self.placed += other.placed
        self.pending += other.pending
        self.batches += other.batches
        self.busy = self.busy or other.busy
        self.paced = self.paced or other.paced


def node_rows() -> tuple[list[NodeSnapshot], dict[int, tuple]]:
    """Every node's static facts (nothing used yet), and the stored allocation counters, to refresh them."""
    from nodes.models import Approval, Node

    snaps, stored = [], {}
    fields = ("id", "name", "region", "labels", "trust", "public_pool", "owner_project_id", "approval", "online")
    fields += ("draining", "cpu_milli", "memory_bytes", "gpus", "allocated_cpu_milli", "allocated_memory_bytes")
    fields += ("disk_bytes", "allocated_disk_bytes", "job_egress_error", "allowed_images")
    for row in Node.objects.values(*fields, "allocated_gpus"):
        snaps.append(
            NodeSnapshot(
                id=row["id"],
                name=row["name"],
                region=row["region"],
                labels=frozenset((str(k), str(v)) for k, v in (row["labels"] or {}).items()),
                trust=row["trust"],
                public_pool=row["public_pool"],
                owner_project_id=row["owner_project_id"],
                approved=row["approval"] == Approval.APPROVED,
                online=row["online"],
                draining=row["draining"],
                cpu_milli=row["cpu_milli"],
                memory_bytes=row["memory_bytes"],
                disk_bytes=row["disk_bytes"],
                gpu_uuids=tuple(g["uuid"] for g in sorted(row["gpus"] or [], key=lambda g: g.get("index", 0))),
                runs_networked=not row["job_egress_error"],  # its agent refuses networked jobs, saying why
                image_patterns=tuple(row["allowed_images"] or ()),
            )
        )
        stored[row["id"]] = (
            row["allocated_cpu_milli"],
            row["allocated_memory_bytes"],
            sorted(row["allocated_gpus"] or []),
            row["allocated_disk_bytes"],
        )
    return snaps, stored


def with_usage(nodes: list[NodeSnapshot]) -> list[NodeSnapshot]:
    """The nodes with what their active attempts hold now, summed from the attempts (never from a counter)."""
    used = {
        row["node_id"]: (row["cpu"] or 0, row["mem"] or 0, row["disk"] or 0)
        for row in Attempt.objects.filter(state__in=ATTEMPT_ACTIVE, node__isnull=False)
        .values("node_id")
        .annotate(cpu=Sum("cpu_milli"), mem=Sum("memory_bytes"), disk=Sum("disk_bytes"))
    }
    gpus: dict[int, set[str]] = {}
    for node_id, uuids in Attempt.objects.filter(
        state__in=ATTEMPT_ACTIVE, node__isnull=False, job__gpu_count__gt=0
    ).values_list("node_id", "gpu_uuids"):
        gpus.setdefault(node_id, set()).update(uuids or [])
    out = []
    for node in nodes:
        if node.id in used or node.id in gpus:
            cpu, mem, disk = used.get(node.id, (0, 0, 0))
            node = replace(
                node,
                used_cpu_milli=cpu,
                used_memory_bytes=mem,
                used_disk_bytes=disk,
                used_gpus=frozenset(gpus.get(node.id, ())),
            )
        out.append(node)
    return out


def node_snapshots() -> tuple[list[NodeSnapshot], dict[int, tuple]]:
    base, stored = node_rows()
    return with_usage(base), stored


def job_snapshot(job: Job) -> JobSnapshot:
    return JobSnapshot(
        id=job.pk,
        project_id=job.project_id,
        cpu_milli=job.cpu_milli,
        memory_bytes=job.memory_bytes,
        gpu_count=job.gpu_count,
        disk_bytes=job.disk_bytes,
        queued_at=job.queued_at.timestamp(),
        region=job.region,
        node_selector=frozenset((str(k), str(v)) for k, v in (job.node_selector or {}).items()),
        pool=job.pool,
        min_trust=job.min_trust,
        needs_secrets=job.has_env,
        not_before=job.not_before.timestamp() if job.not_before else None,
        priority=job.priority,
        networked=job.network == Network.DEFAULT,
        image=job.image,
    )


def project_limits(project_ids: set[int], *, now: datetime | None = None) -> dict[int, ProjectLimit]:
    """Per project: running jobs against its concurrency cap, its fair-share weight, what its active attempts
    hold, and (with EULER_FAIRSHARE_HALF_LIFE) its decayed recent usage from the ledger."""
    from quotas.models import Project, Quota

    active = dict(
        Job.objects.filter(project_id__in=project_ids, state__in=ACTIVE)
        .values("project_id")
        .annotate(n=Count("id"))
        .values_list("project_id", "n")
    )
    caps = dict(Quota.objects.filter(project_id__in=project_ids).values_list("project_id", "max_concurrent_jobs"))
    weights = dict(Project.objects.filter(pk__in=project_ids).values_list("pk", "weight"))
    held = {
        row["job__project_id"]: (float(row["cpu"] or 0), float(row["mem"] or 0), float(row["gpus"] or 0))
        for row in Attempt.objects.filter(state__in=ATTEMPT_ACTIVE, job__project_id__in=project_ids)
        .values("job__project_id")
        .annotate(cpu=Sum("cpu_milli"), mem=Sum("memory_bytes"), gpus=Sum("job__gpu_count"))
    }
    half_life = settings.EULER_FAIRSHARE_HALF_LIFE
    recent = recent_usage(project_ids, now=now or timezone.now(), half_life=half_life) if half_life > 0 else {}
    out = {}
    for pid in project_ids:
        holding = held.get(pid, (0.0, 0.0, 0.0))
        past = recent.get(pid)
        out[pid] = ProjectLimit(
            active=active.get(pid, 0),
            max_concurrent=caps.get(pid),
            weight=weights.get(pid, 1.0),
            held=holding,
            recent=(past[0], 0.0, past[1]) if half_life > 0 else None,  # no memory in the ledger: see blended
        )
    return out


def recent_usage(project_ids: set[int], *, now: datetime, half_life: float) -> dict[int, tuple[float, float]]:
    """Per project, decayed CPU and GPU usage from the (daily) ledger as average holdings: (millicores, GPUs)."""
    from quotas.models import Resource, UsageEntry

    since = (now - timedelta(seconds=max(10 * half_life, 86400))).date()
    amounts: dict[int, tuple[list, list]] = {pid: ([], []) for pid in project_ids}
    rows = UsageEntry.objects.filter(
        project_id__in=project_ids,
        day__gte=since,
        agent_name="",
        resource__in=[Resource.CPU_CORE_SECONDS, Resource.GPU_SECONDS],
    ).values_list("project_id", "day", "resource", "amount")
    for pid, day, resource, amount in rows:
        start = datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp()
        when = start + min(86400.0, max(0.0, now.timestamp() - start)) / 2  # the middle of the day's part so far
        amounts[pid][resource == Resource.GPU_SECONDS].append((when, amount))
    t = now.timestamp()
    return {
        pid: (
            1000 * fairshare.decayed_average(cpu, now=t, half_life=half_life),
            fairshare.decayed_average(gpu, now=t, half_life=half_life),
        )
        for pid, (cpu, gpu) in amounts.items()
    }


def queued_order() -> list[int]:
    """Every queued job's id, the projects' own queues (priority, then FIFO) interleaved: every project's first
    job, then every project's second... so that each batch of a long queue holds every project's next jobs
    and fair share holds across batches, not only within one."""
    rank = Window(
        RowNumber(),
        partition_by=[F("project_id")],
        order_by=[F("priority").desc(), F("queued_at").asc(), F("id").asc()],
    )
    return list(
        Job.objects.filter(state=JobState.QUEUED)
        .annotate(rank=rank)
        .order_by("rank", "queued_at", "id")
        .values_list("id", flat=True)
    )


def _advisory_lock() -> bool:
    if connection.vendor != "postgresql":
        return True
    with connection.cursor() as cur:
        cur.execute("SELECT pg_try_advisory_xact_lock(%s)", [ADVISORY_KEY])
        return bool(cur.fetchone()[0])


def _refresh_counters(nodes: list[NodeSnapshot], stored: dict[int, tuple], added: dict[int, list]) -> None:
    """Keep Node.allocated_* (shown to operators) equal to what active attempts hold."""
    from nodes.models import Node

    changed = []
    for node in nodes:
        cpu, mem, uuids, disk = added.get(node.id, (0, 0, (), 0))
        want = (
            node.used_cpu_milli + cpu,
            node.used_memory_bytes + mem,
            sorted(node.used_gpus.union(uuids)),
            node.used_disk_bytes + disk,
        )
        if stored.get(node.id) != want:
            changed.append((node.id, *want))
            stored[node.id] = want
    if changed:
        with connection.cursor() as cur:
            cur.executemany(
                f"UPDATE {Node._meta.db_table} SET allocated_cpu_milli = %s, allocated_memory_bytes = %s, "
                "allocated_gpus = %s, allocated_disk_bytes = %s WHERE id = %s",
                [(cpu, mem, json.dumps(uuids), disk, node_id) for node_id, cpu, mem, uuids, disk in changed],
            )


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
    outstanding = Attempt.objects.filter(state=AttemptState.ASSIGNED).count()
    return policy.handover_allowance(window=window, web_processes=webs, outstanding=outstanding)


@transaction.atomic
def _batch(*, now: datetime, ids: list[int], rows: dict) -> PassStats:
    stats = PassStats(batches=1)
    if not _advisory_lock():
        stats.busy = True
        return stats
    jobs = list(
        Job.objects.select_for_update(skip_locked=True, of=("self",))
        .filter(pk__in=ids, state=JobState.QUEUED)
        .defer("env")
    )
    if not jobs:
        return stats
    if "nodes" not in rows:  # static node facts once per pass; what attempts hold is re-read every batch
        rows["nodes"], rows["stored"] = node_rows()
    nodes, stored = with_usage(rows["nodes"]), rows["stored"]
    limits = project_limits({job.project_id for job in jobs}, now=now)
    snapshots = {job.pk: job_snapshot(job) for job in jobs}
    held = rows.setdefault("held", {})  # node id -> job: reservations of earlier batches stand in later ones
    plan = policy.place(
        snapshots.values(),
        nodes,
        now=now.timestamp(),
        projects=limits,
        reserve_after=settings.EULER_SCHEDULER_RESERVE_AFTER,
        held=held,
    )
    placements, pending = plan.placements, dict(plan.pending)
    allowance = rows.get("allowance")
    if allowance is not None:  # the handover window: the fairest first, the rest wait for nodes to start theirs
        placements, paced = placements[:allowance], placements[allowance:]
        pending.update(dict.fromkeys((p.job_id for p in paced), policy.REASON_PACED))
        rows["allowance"] = allowance - len(placements)
        stats.paced = bool(paced)
    placed = {p.job_id for p in placements}
    held.update({node_id: snapshots[job_id] for job_id, node_id in plan.reservations.items() if job_id not in placed})

    by_id = {job.pk: job for job in jobs}
    names = {node.id: node.name for node in nodes}
    placed_jobs, attempts, added = [], [], {}
    numbers = dict(
        Attempt.objects.filter(job_id__in=[p.job_id for p in placements])
        .values("job_id")
        .annotate(n=Count("id"))
        .values_list("job_id", "n")
    )
    for p in placements:
        job = by_id[p.job_id]
        placed_jobs.append(job)
        deadline = now.timestamp() + job.timeout_seconds + settings.EULER_JOB_TIMEOUT_GRACE
        attempts.append(
            Attempt(
                job=job,
                number=numbers.get(job.pk, 0) + 1,
                node_id=p.node_id,
                node_name=names[p.node_id],
                cpu_milli=job.cpu_milli,
                memory_bytes=job.memory_bytes,
                disk_bytes=job.disk_bytes,
                gpu_uuids=list(p.gpu_uuids),
                state=AttemptState.ASSIGNED,
                deadline_at=datetime.fromtimestamp(deadline + settings.EULER_JOB_START_GRACE, tz=now.tzinfo),
            )
        )
        e = added.setdefault(p.node_id, [0, 0, set(), 0])
        e[0] += job.cpu_milli
        e[1] += job.memory_bytes
        e[2].update(p.gpu_uuids)
        e[3] += job.disk_bytes
    if placed_jobs:
        transitions.assign_many(placed_jobs, attempts, now=now)
    by_reason: dict[str, list[int]] = {}
    for job_id, reason in pending.items():
        if by_id[job_id].pending_reason != reason[:1000]:
            by_reason.setdefault(reason[:1000], []).append(job_id)
    for reason, ids in by_reason.items():
        Job.objects.filter(pk__in=ids).update(pending_reason=reason)
    _refresh_counters(nodes, stored, added)
    woken = sorted(added)
    transaction.on_commit(lambda: wake_nodes(woken))
    stats.placed, stats.pending = len(placed_jobs), len(pending)
    return stats


def one_pass(*, now: datetime | None = None, batch: int | None = None) -> PassStats:
    """Place queued jobs in fair-share order, one transaction per batch of `batch` jobs (see queued_order)."""
    size = batch or settings.EULER_SCHEDULER_BATCH
    stats, rows = PassStats(), {}
    started = time.perf_counter()
    order = queued_order()
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


def run(*, now: datetime | None = None) -> PassStats:
    """Run passes until nobody asked for another; returns at once when another process holds the pass."""
    import redis

    from euler.redis import client

    stats = PassStats()
    try:
        r = client()
        r.delete(redis_key("requested"))  # from here on, a new request enqueues a new task (see wakeups)
        r.set(redis_key("dirty"), 1)
        while True:
            lock = r.lock(redis_key("lock"), timeout=120, blocking=False)
            if not lock.acquire(blocking=False):
                stats.busy = True
                return stats  # the holder sees the flag and goes again
            try:
                while r.delete(redis_key("dirty")):
                    stats.add(one_pass(now=now))
            finally:
                try:
                    lock.release()
                except redis.exceptions.LockError:
                    log.warning("scheduler lock expired during a pass")
            if not r.exists(redis_key("dirty")):
                return stats
    except redis.exceptions.RedisError as exc:
        log.warning("scheduler runs without its Redis lock: %s", type(exc).__name__)
        stats.add(one_pass(now=now))
        return stats
