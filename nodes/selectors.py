"""Reads for nodes: a project's own nodes, and the public pool as a summary."""

from __future__ import annotations

from collections import defaultdict

from django.db.models import Q, QuerySet

from nodes.models import Approval, EnrollmentToken, Node, TrustLevel


def nodes_of_project(project) -> QuerySet[Node]:
    return Node.objects.filter(owner_project=project).order_by("name")


def public_pool_nodes() -> QuerySet[Node]:
    """Nodes any project's jobs may land on: approved platform nodes, and community nodes admitted to the pool."""
    return Node.objects.filter(approval=Approval.APPROVED).filter(
        Q(trust=TrustLevel.PLATFORM) | Q(trust=TrustLevel.COMMUNITY, public_pool=True)
    )


def free_gpus(node: Node) -> list[dict]:
    """GPUs a job could get now: not held, and healthy (an unhealthy GPU is never offered)."""
    taken = set(node.allocated_gpus or [])
    return [g for g in node.gpus or [] if g.get("uuid") not in taken and g.get("healthy", True)]


def pool_summary(nodes) -> dict:
    """Counts and free capacity by region and by GPU model; offline and draining nodes count as not free."""
    total = {"nodes": 0, "online": 0, "free_cpu_milli": 0, "free_memory_bytes": 0, "free_gpus": 0}
    by_region: dict[str, dict] = defaultdict(
        lambda: {"nodes": 0, "online": 0, "free_cpu_milli": 0, "free_memory_bytes": 0, "free_gpus": 0}
    )
    by_model: dict[str, dict] = defaultdict(lambda: {"total": 0, "free": 0})
    for node in nodes:
        usable = node.online and not node.draining
        free_cpu = max(node.cpu_milli - node.allocated_cpu_milli, 0) if usable else 0
        free_mem = max(node.memory_bytes - node.allocated_memory_bytes, 0) if usable else 0
        free = free_gpus(node) if usable else []
        for bucket in (total, by_region[node.region or ""]):
            bucket["nodes"] += 1
            bucket["online"] += int(node.online)
            bucket["free_cpu_milli"] += free_cpu
            bucket["free_memory_bytes"] += free_mem
            bucket["free_gpus"] += len(free)
        for g in node.gpus or []:
            by_model[g.get("model") or "unknown"]["total"] += 1
        for g in free:
            by_model[g.get("model") or "unknown"]["free"] += 1
    return {
        **total,
        "by_region": [{"region": r, **v} for r, v in sorted(by_region.items())],
        "by_gpu_model": [{"model": m, **v} for m, v in sorted(by_model.items())],
    }


def enrollment_tokens_for(*, project=None, staff: bool = False) -> QuerySet[EnrollmentToken]:
    qs = EnrollmentToken.objects.filter(project=project) if project is not None else EnrollmentToken.objects.none()
    if staff:
        qs = qs | EnrollmentToken.objects.filter(project__isnull=True)
    return qs.order_by("-created_at", "-id")


def node_of_project(*, project, node_id: int) -> Node | None:
    return Node.objects.filter(owner_project=project, pk=node_id).first()
