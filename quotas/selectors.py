"""Reads for tenancy: the session's current project, quota and usage figures."""

from __future__ import annotations

from django.db.models import Sum
from django.utils import timezone

from quotas.models import Membership, Project, Quota, Resource, UsageEntry
from quotas.periods import period_bounds

SESSION_PROJECT_KEY = "euler_project_id"


def session_project(request) -> Project | None:
    user = request.user
    wanted = request.session.get(SESSION_PROJECT_KEY) if hasattr(request, "session") else None
    memberships = Membership.objects.select_related("project").filter(user=user)
    if wanted:
        chosen = memberships.filter(project_id=wanted).first()
        if chosen:
            return chosen.project
    first = memberships.order_by("created_at", "id").first()
    return first.project if first else None


def user_projects(user):
    return Project.objects.filter(memberships__user=user).order_by("name")


def project_usage(project: Project, now=None) -> dict[str, float]:
    """Usage in the current period from the ledger (plus not-yet-flushed counters, when wired)."""
    start, end = period_bounds(now or timezone.now())
    rows = (
        UsageEntry.objects.filter(project=project, day__gte=start.date(), day__lt=end.date())
        .values("resource")
        .annotate(total=Sum("amount"))
    )
    used = {r.value: 0.0 for r in Resource}
    for row in rows:
        used[row["resource"]] = float(row["total"] or 0)
    # The live invocation counter already includes what the ledger holds plus calls not yet flushed.
    try:
        from euler.redis import client

        live = client().get(f"euler:inv:used:{project.pk}:{start:%Y%m}")
    except Exception:  # noqa: BLE001 - Redis down: the ledger alone is still a fair answer
        live = None
    if live is not None:
        used[Resource.INVOCATIONS.value] = max(used[Resource.INVOCATIONS.value], float(live))
    return used


def project_summary(project: Project, now=None) -> dict:
    now = now or timezone.now()
    start, end = period_bounds(now)
    quota = Quota.objects.get(project=project)
    used = project_usage(project, now)
    from quotas.models import ApiKey

    budgets = {
        "cpu_core_seconds": quota.cpu_core_seconds,
        "gpu_seconds": quota.gpu_seconds,
        "invocations": quota.invocations,
    }
    resources = {
        name: {"limit": limit, "used": used.get(name, 0.0), "remaining": max(0.0, limit - used.get(name, 0.0))}
        for name, limit in budgets.items()
    }
    resources["api_keys"] = {
        "limit": quota.max_api_keys,
        "used": ApiKey.objects.filter(project=project, revoked_at__isnull=True).count(),
    }
    resources["api_keys"]["remaining"] = max(0, quota.max_api_keys - resources["api_keys"]["used"])
    resources["concurrent_jobs"] = {"limit": quota.max_concurrent_jobs}
    return {
        "id": project.pk,
        "name": project.name,
        "slug": project.slug,
        "created_at": project.created_at,
        "period": {"start": start, "end": end},
        "quota": {
            "cpu_core_seconds": quota.cpu_core_seconds,
            "gpu_seconds": quota.gpu_seconds,
            "invocations": quota.invocations,
            "max_concurrent_jobs": quota.max_concurrent_jobs,
            "max_api_keys": quota.max_api_keys,
        },
        "usage": resources,
        "weight": project.weight,
        "fair_share": fair_share(project),
    }


def fair_share(project: Project) -> dict:
    """The project's fair-share weight and current share (computed by the jobs app, which holds the attempts)."""
    from jobs.selectors import project_share

    return project_share(project=project)
