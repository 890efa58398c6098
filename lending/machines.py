"""The lender's view of their machines: state, what runs there now, what each contributed per day, losses.

It shows a job by id and project only where the lender belongs to that project; elsewhere only how many run.
Never a job's env, command, logs or outputs.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta

from django.db.models import Count, Q, Sum

DAYS = 30
MS_PER_HOUR = 3_600_000
# The machine was taken back: its lender's reclaim, or its window's end (a reclaim known ahead). A preemption is
# Euler's own choice (a higher-priority job took the place): it counts against no machine.
RECLAIM_REASONS = frozenset({"reclaimed", "window_closed"})


def lent_nodes(user):
    """The nodes whose enrollment token `user` created."""
    from nodes.models import EnrollmentToken, Node

    if not getattr(user, "pk", None):
        return Node.objects.none()
    ids = EnrollmentToken.objects.filter(created_by=user, node__isnull=False).values("node_id")
    return Node.objects.filter(pk__in=ids).order_by("name")


def lent_node(user, name: str):
    return lent_nodes(user).filter(name=name).first()


def lender_of(node_id: int):
    """The user who lent the node (who created its enrollment token), or None."""
    from nodes.models import EnrollmentToken

    token = EnrollmentToken.objects.filter(node_id=node_id, created_by__isnull=False).order_by("-created_at").first()
    return token.created_by if token else None


def node_state(node) -> str:
    if node.approval != "approved":
        return node.approval
    if node.reclaimed_at is not None:
        return "reclaimed"
    if node.draining:
        return "draining"
    return "online" if node.online else "offline"


def daily_hours(entries, days: list[date]) -> dict[int, list[dict]]:
    """Per node: credited CPU core-, GPU-, memory GiB- and disk GiB-hours per UTC day over `days`."""
    rows = (
        entries.filter(day__gte=days[0], day__lte=days[-1], credited=True)
        .values("node_id", "day")
        .annotate(cpu=Sum("cpu_ms"), gpu=Sum("gpu_ms"), mem=Sum("memory_gib_ms"), disk=Sum("disk_gib_ms"))
    )
    by_node: dict[int, dict[date, dict]] = {}
    for r in rows:
        by_node.setdefault(r["node_id"], {})[r["day"]] = r
    out = {}
    for node_id, per_day in by_node.items():
        series = []
        for day in days:
            r = per_day.get(day) or {}
            series.append(
                {
                    "day": day.isoformat(),
                    "cpu_hours": round((r.get("cpu") or 0) / MS_PER_HOUR, 3),
                    "gpu_hours": round((r.get("gpu") or 0) / MS_PER_HOUR, 3),
                    "memory_gib_hours": round((r.get("mem") or 0) / MS_PER_HOUR, 3),
                    "disk_gib_hours": round((r.get("disk") or 0) / MS_PER_HOUR, 3),
                }
            )
        out[node_id] = series
    return out


def machines(user, *, now: datetime) -> list[dict]:
    """Everything the lender's page and `GET /api/v1/lending` show, one dict per lent machine."""
    from jobs.models import Attempt
    from jobs.states import ATTEMPT_ACTIVE
    from lending import reliability
    from lending.models import LedgerEntry
    from lending.terms import terms_dict
    from nodes.models import EventKind, NodeEvent
    from quotas.models import Membership

    nodes = list(lent_nodes(user))
    ids = [n.pk for n in nodes]
    mine = set(Membership.objects.filter(user=user).values_list("project_id", flat=True))
    running: dict[int, dict] = {i: {"jobs": [], "other_jobs": 0} for i in ids}
    active = Attempt.objects.filter(node_id__in=ids, state__in=ATTEMPT_ACTIVE)
    for node_id, job_id, project_id, project_name in active.values_list(
        "node_id", "job_id", "job__project_id", "job__project__name"
    ).order_by("job_id"):
        if project_id in mine:
            running[node_id]["jobs"].append({"job_id": job_id, "project": project_name})
        else:
            running[node_id]["other_jobs"] += 1
    today = now.date()
    days = [today - timedelta(days=DAYS - 1 - i) for i in range(DAYS)]
    entries = LedgerEntry.objects.filter(node_id__in=ids)
    hours = daily_hours(entries, days)
    since = now - timedelta(days=DAYS)
    counts = {
        r["node_id"]: r
        for r in entries.filter(ended_at__gte=since)
        .values("node_id")
        .annotate(
            attempts=Count("id"),
            lost=Count("id", filter=Q(outcome="lost")),
            reclaims=Count("id", filter=Q(reason__in=RECLAIM_REASONS)),
            gpu_faults=Count("id", filter=Q(gpu_fault=True)),
        )
    }
    gpu_events = dict(
        NodeEvent.objects.filter(node_id__in=ids, kind=EventKind.GPU_UNHEALTHY, created_at__gte=since)
        .values("node_id")
        .annotate(n=Count("id"))
        .values_list("node_id", "n")
    )
    scores = reliability.scores_for(ids, now=now)
    empty = [{"day": d.isoformat(), "cpu_hours": 0, "gpu_hours": 0, "memory_gib_hours": 0, "disk_gib_hours": 0}
             for d in days]  # fmt: skip
    out = []
    for node in nodes:
        c = counts.get(node.pk, {})
        out.append(
            {
                "id": node.pk,
                "name": node.name,
                "state": node_state(node),
                "trust": node.trust,
                "public_pool": node.public_pool,
                "region": node.region,
                "approved": {
                    "cpu_milli": node.approved_cpu_milli,
                    "memory_bytes": node.approved_memory_bytes,
                    "disk_bytes": node.approved_disk_bytes,
                    "gpus": len(node.gpus or []),
                },
                "terms": terms_dict(node),
                "running": running[node.pk],
                "last_30_days": {
                    "attempts": c.get("attempts", 0),
                    "lost_attempts": c.get("lost", 0),
                    "reclaims": c.get("reclaims", 0),
                    "gpu_faults": c.get("gpu_faults", 0) + gpu_events.get(node.pk, 0),
                },
                "reclaim": {
                    "reclaimed_at": node.reclaimed_at.isoformat() if node.reclaimed_at else None,
                    "reclaimed_by": node.reclaimed_by,
                    "count": node.reclaim_count,
                },
                "reliability": scores.get(node.pk),
                "daily": hours.get(node.pk, empty),
            }
        )
    return out
