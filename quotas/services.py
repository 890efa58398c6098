"""Writes for tenancy: projects, memberships and API keys."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import OuterRef, Subquery
from django.utils import timezone
from django.utils.text import slugify

import audit
from euler import tokens
from euler.errors import Forbidden, InvalidInput, NotFound, QuotaExceeded
from euler.prepared import Prepared
from quotas import roles
from quotas.models import ApiKey, Membership, Project, Quota, Role

API_KEY_PREFIX = "euler_pk_"
_LAST_USED_RESOLUTION = timedelta(seconds=60)


def _unique_slug(name: str) -> str:
    base = slugify(name, allow_unicode=False)[:80] or "project"
    slug, n = base, 1
    while Project.objects.filter(slug=slug).exists():
        n += 1
        slug = f"{base}-{n}"
    return slug


def free_quota_values() -> dict[str, int]:
    return {
        "cpu_core_seconds": settings.EULER_FREE_QUOTA_CPU_CORE_SECONDS,
        "gpu_seconds": settings.EULER_FREE_QUOTA_GPU_SECONDS,
        "invocations": settings.EULER_FREE_QUOTA_INVOCATIONS,
        "max_concurrent_jobs": settings.EULER_FREE_QUOTA_CONCURRENT_JOBS,
        "max_api_keys": settings.EULER_FREE_QUOTA_API_KEYS,
        "output_bytes": settings.EULER_FREE_QUOTA_OUTPUT_BYTES,
        "max_schedules": settings.EULER_FREE_QUOTA_SCHEDULES,
        "schedule_min_period": settings.EULER_FREE_QUOTA_SCHEDULE_MIN_PERIOD,
        "schedule_runs_per_minute": settings.EULER_FREE_QUOTA_SCHEDULE_RUNS_PER_MINUTE,
    }


def validate_project_name(name: str) -> str:
    name = (name or "").strip()
    if not name or len(name) > 100:
        raise InvalidInput("A project name is 1 to 100 characters.", code="invalid_name")
    if any(ord(c) < 32 for c in name):
        raise InvalidInput("A project name cannot hold control characters.", code="invalid_name")
    return name


@transaction.atomic
def project_create(*, name: str, owner=None) -> Project:
    name = validate_project_name(name)
    if Project.objects.filter(name=name).exists():
        raise InvalidInput(f"A project named {name!r} already exists.", code="name_taken")
    project = Project.objects.create(name=name, slug=_unique_slug(name))
    Quota.objects.create(project=project, **free_quota_values())
    if owner is not None:
        Membership.objects.create(project=project, user=owner, role=Role.OWNER)
    return project


def default_project_for(user) -> Project:
    """The project a new user starts with: named after them, made unique if needed."""
    base = (user.get_username() or "user")[:90]
    name, n = base, 1
    while True:
        try:
            with transaction.atomic():
                return project_create(name=name, owner=user)
        except InvalidInput as exc:
            if exc.code != "name_taken":
                raise
        except IntegrityError:
            pass
        n += 1
        name = f"{base}-{n}"


def member_role(project: Project, user) -> str | None:
    """The user's role in the project, or None when they are not a member."""
    if user is None or not getattr(user, "pk", None):
        return None
    return Membership.objects.filter(project=project, user_id=user.pk).values_list("role", flat=True).first()


@transaction.atomic
def apikey_create(
    *,
    project: Project,
    label: str = "",
    by=None,
    role: str | None = None,
    cap: str | None = None,
    rpm_limit: int | None = None,
) -> tuple[ApiKey, str]:
    """A new API key; the secret is returned once and never stored.

    `by` is the human the key acts for (None: an operator's key); the key's role defaults to, and may not
    exceed, `cap` (the caller's acting role; by default `by`'s role in the project, or owner for an operator).
    `rpm_limit`: the gateway's requests per minute for this key (None: no limit).
    """
    label = (label or "").strip()
    if len(label) > 100:
        raise InvalidInput("A key label is at most 100 characters.", code="invalid_label")
    if cap is None:
        cap = member_role(project, by) if by is not None else Role.OWNER
    if cap is None:
        raise Forbidden("Only a member of the project can create its keys.", code="not_a_member")
    role = role or cap
    if role not in Role.values:
        raise InvalidInput(f"A role is one of {', '.join(Role.values)}.", code="invalid_role")
    if not roles.allows(cap, role):
        raise Forbidden(f"A key cannot outrank its creator: you act as {cap}.", code="role_above_creator")
    quota = Quota.objects.select_for_update().get(project=project)
    active = ApiKey.objects.filter(project=project, revoked_at__isnull=True).count()
    if active >= quota.max_api_keys:
        raise QuotaExceeded(
            f"The project already has {active} active API keys (limit {quota.max_api_keys}); revoke one first.",
            extra={"resource": "api_keys"},
        )
    new = tokens.make(API_KEY_PREFIX)
    if rpm_limit is not None and rpm_limit < 1:
        raise InvalidInput("rpm_limit is at least 1 (leave it out for no limit).", code="invalid_rpm_limit")
    key = ApiKey.objects.create(
        project=project,
        label=label,
        prefix=new.lookup,
        key_hash=new.digest,
        created_by=by,
        role=role,
        rpm_limit=rpm_limit,
    )
    details = {"label": label, "role": role}
    if rpm_limit is not None:
        details["rpm_limit"] = rpm_limit
    audit.record("api_key.created", project=project, target=f"api_key:{key.prefix}", details=details, by=by)
    return key, new.secret


@transaction.atomic
def apikey_revoke(*, project: Project, key_id: int, by=None, role: str | None = None) -> ApiKey:
    """Revoke a key of the project. With `role` (the caller's acting role), only an owner revokes a key
    that another user made; anyone in the project revokes their own."""
    key = ApiKey.objects.filter(project=project, pk=key_id).first()
    if key is None:
        raise NotFound("No such API key.")
    own = by is not None and key.created_by_id == getattr(by, "pk", None)
    if role is not None and not own and not roles.allows(role, Role.OWNER):
        raise Forbidden("Only a project owner can revoke another member's key.", code="owner_required")
    if key.revoked_at is None:
        ApiKey.objects.filter(pk=key.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
        audit.record("api_key.revoked", project=project, target=f"api_key:{key.prefix}", details={"label": key.label})
        key.refresh_from_db()
    return key


def apikeys_follow_member(*, project_id: int, user_id: int, role: str | None, reason: str) -> int:
    """After a member's role changed (`role`) or they left (None): revoke or lower their keys, each audited."""
    keys = ApiKey.objects.select_for_update().filter(
        project_id=project_id, created_by_id=user_id, revoked_at__isnull=True
    )
    changed = 0
    for key in keys:
        target = f"api_key:{key.prefix}"
        if role is None:
            ApiKey.objects.filter(pk=key.pk).update(revoked_at=timezone.now())
            audit.record("api_key.revoked", project=project_id, target=target, details={"reason": reason})
        elif not roles.allows(role, key.role):
            ApiKey.objects.filter(pk=key.pk).update(role=role)
            audit.record(
                "api_key.role_lowered", project=project_id, target=target, details={"from": key.role, "to": role}
            )
        else:
            continue
        changed += 1
    return changed


def _key_query(prefix: str):
    creator_role = Membership.objects.filter(project_id=OuterRef("project_id"), user_id=OuterRef("created_by_id"))
    return (
        ApiKey.objects.select_related("project")
        .annotate(creator_role=Subquery(creator_role.values("role")[:1]))
        .filter(prefix=prefix)
        .order_by("pk")[:1]
    )


_KEY = Prepared(_key_query)  # every request with a key reads it (euler/prepared.py)


def apikey_authenticate(*, raw: str) -> ApiKey | None:
    """The active key for a presented secret, or None. Constant-time on the hash."""
    lookup = tokens.split(API_KEY_PREFIX, raw)
    if lookup is None:
        return None
    key = _KEY.first(lookup)
    if key is None or key.revoked_at is not None or not tokens.matches(raw, key.key_hash):
        return None
    key.acting_role = roles.effective_key_role(
        key_role=key.role, creator_role=key.creator_role, has_creator=key.created_by_id is not None
    )
    if key.acting_role is None:
        return None  # its creator has left the project: the key died with the membership
    now = timezone.now()
    if key.last_used_at is None or now - key.last_used_at > _LAST_USED_RESOLUTION:
        # A conditional update keeps the hot path to one cheap write a minute per key.
        ApiKey.objects.filter(pk=key.pk).exclude(last_used_at__gt=now - _LAST_USED_RESOLUTION).update(last_used_at=now)
        key.last_used_at = now
    return key
