"""What a scheduling pass reads from the database: node, job and project snapshots for the pure policy.

Allocation is summed from active attempts here, never trusted from a counter; queued jobs come in the order
that keeps fair share across batches (queued_order).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Count, F, Sum, Window
from django.db.models.functions import RowNumber
from django.utils import timezone

from euler.prepared import Prepared
from jobs.models import Attempt, Job
from jobs.scheduling import fairshare
from jobs.scheduling import isolation as tiers
from jobs.scheduling import terms as lender_terms
from jobs.scheduling.snapshots import JobSnapshot, NodeSnapshot, ProjectLimit
from jobs.states import ACTIVE, ATTEMPT_ACTIVE, JobState, Network

_NODE_FIELDS = ("id", "name", "region", "labels", "trust", "public_pool", "owner_project_id", "approval", "online")
_NODE_FIELDS += ("draining", "reclaimed_at", "cpu_milli", "memory_bytes", "gpus", "allocated_cpu_milli")
_NODE_FIELDS += ("allocated_memory_bytes", "disk_bytes", "allocated_disk_bytes", "job_egress_error", "allowed_images")
_NODE_FIELDS += ("runtimes", "lender_min_isolation", "lender_terms", "reliability", "allocated_gpus")


def _node_query():
    from nodes.models import Node

    return Node.objects.values_list(*_NODE_FIELDS)


_NODE_ROWS = Prepared(_node_query)


def node_rows() -> tuple[list[NodeSnapshot], dict[int, tuple]]:
    """Every node's static facts (nothing used yet), and the stored allocation counters, to refresh them."""
    from nodes.models import Approval

    snaps, stored = [], {}
    table = settings.EULER_TRUST_MIN_ISOLATION
    now = timezone.now()
    for values in _NODE_ROWS():
        row = dict(zip(_NODE_FIELDS, values, strict=True))
        gpus = [g for g in sorted(row["gpus"] or [], key=lambda g: g.get("index", 0)) if g.get("healthy", True)]
        terms = lender_terms.read(row["lender_terms"], now=now)
        if terms.max_gpus is not None:
            gpus = gpus[: terms.max_gpus]
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
                draining=row["draining"] or row["reclaimed_at"] is not None,  # reclaimed: as drained, till resumed
                cpu_milli=lender_terms.capped(row["cpu_milli"], terms.max_cpu_milli),
                memory_bytes=lender_terms.capped(row["memory_bytes"], terms.max_memory_bytes),
                disk_bytes=lender_terms.capped_disk(row["disk_bytes"], terms.max_disk_bytes),
                gpu_uuids=tuple(g["uuid"] for g in gpus),  # an unhealthy GPU (XID, ECC) is not offered
                gpu_kinds=tuple((str(g.get("model", "")), int(g.get("memory_bytes", 0))) for g in gpus),
                runs_networked=not row["job_egress_error"],  # its agent refuses networked jobs, saying why
                image_patterns=tuple(row["allowed_images"] or ()),
                runtimes=tiers.runtimes_from(row["runtimes"]),
                min_isolation=tiers.node_minimum(row["trust"], row["lender_min_isolation"], table),
                terms_open=terms.open,
                terms_left=terms.left,
                terms_projects=terms.projects,
                terms_max_seconds=terms.max_seconds,
                reliability=row["reliability"],
            )
        )
        stored[row["id"]] = (
            row["allocated_cpu_milli"],
            row["allocated_memory_bytes"],
            sorted(row["allocated_gpus"] or []),
            row["allocated_disk_bytes"],
        )
    return snaps, stored


_USED_BY_NODE = Prepared(
    lambda: (
        Attempt.objects.filter(state__in=ATTEMPT_ACTIVE, node__isnull=False)
        .values("node_id")
        .annotate(cpu=Sum("cpu_milli"), mem=Sum("memory_bytes"), disk=Sum("disk_bytes"))
        .values_list("node_id", "cpu", "mem", "disk")
    )
)
_GPUS_BY_NODE = Prepared(
    lambda: Attempt.objects.filter(state__in=ATTEMPT_ACTIVE, node__isnull=False, job__gpu_count__gt=0).values_list(
        "node_id", "gpu_uuids"
    )
)


def with_usage(nodes: list[NodeSnapshot]) -> list[NodeSnapshot]:
    """The nodes with what their active attempts hold now, summed from the attempts (never from a counter)."""
    used = {node_id: (cpu or 0, mem or 0, disk or 0) for node_id, cpu, mem, disk in _USED_BY_NODE()}
    gpus: dict[int, set[str]] = {}
    for node_id, uuids in _GPUS_BY_NODE():
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
        gpu_model=job.gpu_model,
        gpu_min_memory_bytes=job.gpu_min_memory_bytes,
        disk_bytes=job.disk_bytes,
        queued_at=job.queued_at.timestamp(),
        region=job.region,
        node_selector=frozenset((str(k), str(v)) for k, v in (job.node_selector or {}).items()),
        pool=job.pool,
        min_trust=job.min_trust,
        needs_secrets=job.has_env,
        not_before=job.not_before.timestamp() if job.not_before else None,
        priority=job.priority,
        priority_value=job.priority_value,
        networked=job.network == Network.DEFAULT,
        image=job.image,
        isolation=job.isolation,
        timeout_seconds=job.timeout_seconds,
        min_reliability=job.min_reliability,
        spread_group=job.spread_group,
        checkpoint_lead=checkpoint_lead(job),
    )


def checkpoint_lead(job: Job) -> float | None:
    """A job with a checkpoint: how long before a lender's window closes its stop begins (its grace, clamped as
    every stop's, and the window pass's period: lending/windows.py). None: no checkpoint."""
    if not job.checkpoint:
        return None
    grace = max(0, min(job.stop_grace_seconds, settings.EULER_MAX_STOP_GRACE))  # as jobs.stopping.clamp_grace
    return float(grace) + settings.EULER_WINDOW_CHECK_INTERVAL


def _caps(project_ids):
    from quotas.models import Quota

    return Quota.objects.filter(project_id__in=project_ids).values_list("project_id", "max_concurrent_jobs")


def _weights(project_ids):
    from quotas.models import Project

    return Project.objects.filter(pk__in=project_ids).order_by().values_list("pk", "weight")


_ACTIVE_BY_PROJECT = Prepared(
    lambda project_ids: (
        Job.objects.filter(project_id__in=project_ids, state__in=ACTIVE)
        .values("project_id")
        .annotate(n=Count("id"))
        .values_list("project_id", "n")
    )
)
_CAPS = Prepared(_caps)
_WEIGHTS = Prepared(_weights)
_HELD = Prepared(
    lambda project_ids: (
        Attempt.objects.filter(state__in=ATTEMPT_ACTIVE, job__project_id__in=project_ids)
        .values("job__project_id")
        .annotate(cpu=Sum("cpu_milli"), mem=Sum("memory_bytes"), gpus=Sum("job__gpu_count"))
        .values_list("job__project_id", "cpu", "mem", "gpus")
    )
)


def project_limits(project_ids: set[int], *, now: datetime | None = None) -> dict[int, ProjectLimit]:
    """Per project: running jobs against its concurrency cap, its fair-share weight, what its active attempts
    hold, and (with EULER_FAIRSHARE_HALF_LIFE) its decayed recent usage from the ledger."""
    active = dict(_ACTIVE_BY_PROJECT(project_ids))
    caps = dict(_CAPS(project_ids))
    weights = dict(_WEIGHTS(project_ids))
    held = {pid: (float(cpu or 0), float(mem or 0), float(gpus or 0)) for pid, cpu, mem, gpus in _HELD(project_ids)}
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


def spread_groups(jobs: list[Job]) -> dict[str, set[int]]:
    """Per spread group of these jobs, the nodes its active jobs' attempts hold (jobs/scheduling/spread.py)."""
    wanted = {job.spread_group for job in jobs if job.spread_group}
    if not wanted:
        return {}
    out: dict[str, set[int]] = {}
    rows = Attempt.objects.filter(state__in=ATTEMPT_ACTIVE, job__spread_group__in=wanted, node__isnull=False)
    for group, node_id in rows.values_list("job__spread_group", "node_id"):
        out.setdefault(group, set()).add(node_id)
    return out


def queued_order() -> list[int]:
    """Every queued job's id, priority classes highest first, and within a class the projects' own queues
    (priority, then FIFO) interleaved: every project's first job, then every project's second... so that each
    batch of a long queue holds every project's next jobs and fair share holds across batches, not only within one."""
    compiled = _QUEUED_ORDER.get(connection.vendor)
    if compiled is None:  # the same statement every pass: compiled once per process (~1 ms of the ORM's each time)
        rank = Window(
            RowNumber(),
            partition_by=[F("priority_value"), F("project_id")],
            order_by=[F("priority").desc(), F("queued_at").asc(), F("id").asc()],
        )
        rows = (
            Job.objects.filter(state=JobState.QUEUED)
            .annotate(rank=rank)
            .order_by("-priority_value", "rank", "queued_at", "id")
            .values_list("id", flat=True)
        )
        compiled = _QUEUED_ORDER[connection.vendor] = rows.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(*compiled)
        return [row[0] for row in cursor.fetchall()]


_QUEUED_ORDER: dict[str, tuple[str, tuple]] = {}  # database vendor -> queued_order's (sql, params)
