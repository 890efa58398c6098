"""Reads for console pages from apps that may not be installed yet: each returns None when its app is absent."""

from __future__ import annotations

from django.apps import apps
from django.db.models import Count, Sum
from django.utils import timezone

from quotas.models import Project, Resource, UsageEntry


def model(app_label: str, name: str):
    try:
        return apps.get_model(app_label, name)
    except LookupError:
        return None


def _free_gpus(node) -> int:
    """Healthy GPUs not held (an unhealthy GPU is never offered)."""
    healthy = [g for g in node.gpus or [] if g.get("healthy", True)]
    return max(0, len(healthy) - len({g.get("uuid") for g in healthy} & set(node.allocated_gpus or [])))


def node_row(node) -> dict:
    """One node with what the bars need: used/total CPU, memory and GPUs."""
    return {
        "node": node,
        "cpu_used": node.allocated_cpu_milli,
        "cpu_total": node.cpu_milli,
        "mem_used": node.allocated_memory_bytes,
        "mem_total": node.memory_bytes,
        "disk_used": node.allocated_disk_bytes,
        "disk_total": node.disk_bytes,
        "gpu_used": len(node.allocated_gpus or []),
        "gpu_total": len(node.gpus or []),
        "gpus": node.gpus or [],
        # GPUs the agent found faulty (XID, ECC): no jobs go to them until an operator resets them
        "gpu_unhealthy": [g for g in node.gpus or [] if not g.get("healthy", True)],
    }


def nodes_for(project: Project) -> dict | None:
    """The project's own nodes, and a summary of the public pool it may also run on."""
    Node = model("nodes", "Node")
    if Node is None:
        return None
    from nodes.liveness import live_last_seen

    own = live_last_seen(Node.objects.filter(owner_project=project).order_by("name"))  # Redis: the live time
    pool = list(Node.objects.filter(approval="approved", public_pool=True).exclude(owner_project=project))
    platform = list(Node.objects.filter(approval="approved", trust="platform", owner_project__isnull=True))
    shared = {n.pk: n for n in pool + platform}.values()
    usable = [n for n in list(shared) + own if n.approval == "approved" and n.online and not n.draining]
    return {
        "own": [node_row(n) for n in own],
        "pool": {
            "nodes": len(shared),
            "online": sum(1 for n in shared if n.online),
            "cpu_milli": sum(n.cpu_milli for n in shared if n.online),
            "gpus": sum(len(n.gpus or []) for n in shared if n.online),
            "free_gpus": sum(_free_gpus(n) for n in shared if n.online and not n.draining),
        },
        "online": len(usable),
        "free_gpus": sum(_free_gpus(n) for n in usable),
    }


def job_counts(project: Project) -> dict | None:
    Job = model("jobs", "Job")
    if Job is None:
        return None
    counts = {"queued": 0, "assigned": 0, "running": 0}
    for row in Job.objects.filter(project=project, state__in=list(counts)).values("state").annotate(n=Count("id")):
        counts[row["state"]] = row["n"]
    return counts


def calls_today(project: Project) -> float:
    today = timezone.now().date()
    total = UsageEntry.objects.filter(project=project, day=today, resource=Resource.INVOCATIONS).aggregate(
        total=Sum("amount")
    )["total"]
    return float(total or 0)


def agents_for(project: Project) -> list | None:
    Agent = model("agents", "Agent")
    if Agent is None:
        return None
    return list(Agent.objects.filter(project=project).prefetch_related("instances").order_by("name"))
