"""What a scheduling batch writes, inside its transaction: the attempts it hands over, the pending reasons that
changed, and the nodes' allocation counters shown to operators."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime

from django.conf import settings
from django.db import connection
from django.db.models import Count

from euler.prepared import Prepared
from jobs import transitions
from jobs.models import Attempt, Job
from jobs.scheduling import isolation as tiers
from jobs.scheduling.snapshots import NodeSnapshot, Placement
from jobs.states import AttemptState

Added = dict[int, list]  # node id -> [millicores, memory bytes, GPU UUIDs (set), disk bytes] this batch placed


_ATTEMPT_COUNTS = Prepared(
    lambda job_ids: (
        Attempt.objects.filter(job_id__in=job_ids).values("job_id").annotate(n=Count("id")).values_list("job_id", "n")
    )
)


def assign(
    by_id: Mapping[int, Job],
    placements: Iterable[Placement],
    names: Mapping[int, str],
    *,
    now: datetime,
    nodes: Mapping[int, NodeSnapshot] | None = None,
) -> tuple[int, Added]:
    """Hand the placed jobs to their nodes (one attempt each, through transitions.assign_many); how many, and what
    they take per node."""
    placements = list(placements)
    placed_jobs, attempts, added = [], [], {}
    numbers = dict(_ATTEMPT_COUNTS([p.job_id for p in placements]))
    for p in placements:
        job = by_id[p.job_id]
        placed_jobs.append(job)
        attempt = _attempt(job, p, names[p.node_id], number=numbers.get(job.pk, 0) + 1, now=now)
        if nodes is not None and p.node_id in nodes:
            attempt.isolation, attempt.runtime = runtime_for(job, nodes[p.node_id])
        attempts.append(attempt)
        e = added.setdefault(p.node_id, [0, 0, set(), 0])
        e[0] += job.cpu_milli
        e[1] += job.memory_bytes
        e[2].update(p.gpu_uuids)
        e[3] += job.disk_bytes
    if placed_jobs:
        transitions.assign_many(placed_jobs, attempts, now=now)
    return len(placed_jobs), added


def _attempt(job: Job, p: Placement, node_name: str, *, number: int, now: datetime) -> Attempt:
    deadline = now.timestamp() + job.timeout_seconds + settings.EULER_JOB_TIMEOUT_GRACE
    return Attempt(
        job=job,
        number=number,
        node_id=p.node_id,
        node_name=node_name,
        cpu_milli=job.cpu_milli,
        memory_bytes=job.memory_bytes,
        disk_bytes=job.disk_bytes,
        gpu_uuids=list(p.gpu_uuids),
        state=AttemptState.ASSIGNED,
        deadline_at=datetime.fromtimestamp(deadline + settings.EULER_JOB_START_GRACE, tz=now.tzinfo),
    )


def runtime_for(job: Job, node: NodeSnapshot) -> tuple[str, str]:
    """(the isolation the job needs on the node, the runtime it runs under there: "" for the engine's default)."""
    sandbox = tiers.needs_sandbox(job_isolation=job.isolation, node_minimum=node.min_isolation)
    runtime = tiers.choose(node.runtimes, sandbox=sandbox, networked=job.network == "default")
    return (tiers.SANDBOX if sandbox else tiers.RUNC), runtime


def save_pending(by_id: Mapping[int, Job], pending: Mapping[int, str]) -> None:
    """Write the pending reasons that changed, one UPDATE per reason."""
    by_reason: dict[str, list[int]] = {}
    for job_id, reason in pending.items():
        if by_id[job_id].pending_reason != reason[:1000]:
            by_reason.setdefault(reason[:1000], []).append(job_id)
    for reason, ids in by_reason.items():
        Job.objects.filter(pk__in=ids).update(pending_reason=reason)


def refresh_counters(nodes: list[NodeSnapshot], stored: dict[int, tuple], added: Added) -> None:
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
