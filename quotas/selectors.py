"""Reads for tenancy: the session's current project, quota and usage figures."""

from __future__ import annotations

from django.db.models import Sum
from django.utils import timezone

from euler.prepared import Prepared
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


# Every usage figure reads it, and every submit (jobs.usage.check_budget): built once (euler/prepared.py).
_LEDGER_SUMS = Prepared(
    lambda project_id, start, end, resources: (
        UsageEntry.objects.filter(project_id=project_id, day__gte=start, day__lt=end, resource__in=resources)
        .values("resource")
        .annotate(total=Sum("amount"))
        .values_list("resource", "total")
    )
)


def ledger_usage(project_id: int, resources, now=None) -> dict[str, float]:
    """The ledger's sums in the current period for these resources (0.0 where it has none)."""
    start, end = period_bounds(now or timezone.now())
    used = dict.fromkeys(resources, 0.0)
    for resource, total in _LEDGER_SUMS(project_id, start.date(), end.date(), list(used)):
        used[resource] = float(total or 0)
    return used


def project_usage(project: Project, now=None) -> dict[str, float]:
    """Usage in the current period from the ledger (plus not-yet-flushed counters, when wired)."""
    now = now or timezone.now()
    start, _ = period_bounds(now)
    used = ledger_usage(project.pk, [r.value for r in Resource], now)
    # The live invocation counter already includes what the ledger holds plus calls not yet flushed.
    try:
        from euler.redis import client

        live = client().get(f"euler:inv:used:{project.pk}:{start:%Y%m}")
    except Exception:  # noqa: BLE001 - Redis down: the ledger alone is still a fair answer
        live = None
    if live is not None:
        used[Resource.INVOCATIONS.value] = max(used[Resource.INVOCATIONS.value], float(live))
    return used


def output_bytes_stored(project: Project) -> int:
    """Bytes of job outputs the project stores: what its `output_bytes` quota counts (jobs/outputs)."""
    from jobs.outputs.selectors import stored_bytes

    return stored_bytes(project=project)


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
    stored = output_bytes_stored(project)
    resources["output_bytes"] = {
        "limit": quota.output_bytes,
        "used": stored,
        "remaining": max(0, quota.output_bytes - stored),
    }
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
            "output_bytes": quota.output_bytes,
        },
        "usage": resources,
        "weight": project.weight,
        "fair_share": fair_share(project),
    }


def fair_share(project: Project) -> dict:
    """The project's fair-share weight and current share (computed by the jobs app, which holds the attempts)."""
    from jobs.selectors import project_share

    return project_share(project=project)


# --- is a credential still good? (open streams re-check it while they run) ---------------------
RECHECK_SECONDS = 1.5  # an open stream notices a revoked key or a closed session within about this


def credential_of(request, project) -> tuple:
    """What authenticated `request`, in a form `credential_alive` can re-check later (plain data)."""
    from quotas.models import ApiKey

    auth = getattr(request, "auth", None) or getattr(request, "_euler_key", None)
    if isinstance(auth, ApiKey):
        return ("key", auth.pk)
    session = getattr(request, "session", None)
    user = getattr(request, "user", None)
    return ("session", getattr(session, "session_key", None), getattr(user, "pk", None), project.pk)


def credential_alive(credential: tuple) -> bool:
    """True while the key is active and its creator still a member, or the session is still signed in
    as the same user and that user still a member of the project."""
    from importlib import import_module

    from django.conf import settings

    from quotas import roles
    from quotas.models import ApiKey

    if credential[0] == "key":
        key = (
            ApiKey.objects.filter(pk=credential[1], revoked_at__isnull=True)
            .values("role", "created_by_id", "project_id")
            .first()
        )
        if key is None:
            return False
        if key["created_by_id"] is None:
            return True
        creator_role = (
            Membership.objects.filter(project_id=key["project_id"], user_id=key["created_by_id"])
            .values_list("role", flat=True)
            .first()
        )
        return roles.effective_key_role(key_role=key["role"], creator_role=creator_role, has_creator=True) is not None
    _kind, session_key, user_id, project_id = credential
    if not session_key or user_id is None:
        return False
    store = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
    if str(store.load().get("_auth_user_id", "")) != str(user_id):
        return False  # signed out (the session was flushed) or signed in as someone else
    return Membership.objects.filter(project_id=project_id, user_id=user_id).exists()
