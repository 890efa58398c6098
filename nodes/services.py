"""Writes for nodes: enrollment tokens, enroll, credentials. One function per operation, used by the API, the
admin and the commands alike. State changes (approval, trust, pool, drain) are nodes/transitions.py's, re-exported
here for the callers that know them by this module."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

import audit
import audit.context
from euler import tokens
from euler.errors import Conflict, Forbidden, InvalidInput, NotFound, Unauthorized
from nodeagent import protocol
from nodes import policy, transitions
from nodes.auth import CREDENTIAL_PREFIX, ENROLLMENT_PREFIX
from nodes.models import EnrollmentToken, EventKind, Node, TrustLevel
from nodes.transitions import (  # noqa: F401 - re-exported: the state changes callers know by this module
    event,
    node_approve,
    node_approve_many,
    node_capacity_approve,
    node_drain,
    node_reject,
    node_set_public_pool,
    node_set_trust,
    node_undrain,
    trust_level,
)

PROJECT_TRUST_LEVELS = frozenset({TrustLevel.UNTRUSTED, TrustLevel.COMMUNITY})


# --- enrollment tokens ------------------------------------------------------------------------
@transaction.atomic
def enrollment_token_create(
    *,
    project=None,
    trust: str = TrustLevel.UNTRUSTED,
    ttl: int | None = None,
    region: str = "",
    labels: dict | None = None,
    label: str = "",
    by=None,
    auto_approve: bool = False,
) -> tuple[EnrollmentToken, str]:
    """A one-time token; the secret is returned once. A project's token enrolls a node that project owns
    (untrusted or community); a token without a project enrolls a platform-owned node (staff only)."""
    trust = trust_level(trust)
    if project is not None and trust not in PROJECT_TRUST_LEVELS:
        raise Forbidden("Only staff create platform enrollment tokens.", code="platform_token_staff_only")
    if project is None and by is not None and not getattr(by, "is_staff", False):
        raise Forbidden("Only staff create platform enrollment tokens.", code="platform_token_staff_only")
    ttl = settings.EULER_ENROLLMENT_TOKEN_TTL if ttl is None else int(ttl)
    if not 60 <= ttl <= settings.EULER_ENROLLMENT_TOKEN_MAX_TTL:
        raise InvalidInput("ttl is 60 seconds to 7 days.", code="invalid_ttl")
    if not policy.REGION_RE.match(region or ""):
        raise InvalidInput("region: at most 63 letters, digits, '.', '_', '-'.", code="invalid_region")
    why = policy.validate_labels(labels or {})
    if why:
        raise InvalidInput(why, code="invalid_labels")
    if len(label or "") > 100:
        raise InvalidInput("A token label is at most 100 characters.", code="invalid_label")
    if auto_approve and (project is not None or not settings.DEBUG):
        raise Forbidden("Auto-approval is for the development platform node only.", code="auto_approve_dev_only")
    new = tokens.make(ENROLLMENT_PREFIX)
    token = EnrollmentToken.objects.create(
        project=project,
        lookup=new.lookup,
        digest=new.digest,
        trust=trust,
        region=region or "",
        labels=labels or {},
        label=label or "",
        auto_approve=auto_approve,
        created_by=by if getattr(by, "pk", None) else None,
        expires_at=timezone.now() + timedelta(seconds=ttl),
    )
    audit.record(
        "enrollment_token.created",
        project=project,
        target=f"enrollment_token:{token.pk}",
        details={"trust": trust, "label": token.label, "ttl": ttl, "auto_approve": auto_approve},
        by=by,
    )
    return token, new.secret


@transaction.atomic
def enrollment_token_delete(*, token_id: int, project=None, staff: bool = False) -> None:
    """Revoke a token (unused or not): it can no longer enroll. Platform tokens only by staff."""
    qs = EnrollmentToken.objects.filter(pk=token_id)
    qs = qs.filter(project__isnull=True) if project is None else qs.filter(project=project)
    if project is None and not staff:
        raise NotFound("No such enrollment token.")
    if qs.delete()[0] == 0:
        raise NotFound("No such enrollment token.")
    audit.record("enrollment_token.revoked", project=project, target=f"enrollment_token:{token_id}")


# --- enroll ----------------------------------------------------------------------------------
def _new_credential(node: Node) -> str:
    new = tokens.make(CREDENTIAL_PREFIX)
    node.credential_lookup = new.lookup
    node.credential_digest = new.digest
    return new.secret


@transaction.atomic
def node_enroll(*, req: protocol.EnrollRequest, hostname_hint: str = "") -> tuple[Node, str]:
    """Exchange a one-time enrollment token for a node and its credential (returned once)."""
    lookup = tokens.split(ENROLLMENT_PREFIX, req.token)
    token = EnrollmentToken.objects.select_for_update().filter(lookup=lookup).first() if lookup is not None else None
    if token is None or not tokens.matches(req.token, token.digest):
        raise Unauthorized("The enrollment token is unknown or was revoked.", code="invalid_enrollment_token")
    if token.used_at is not None:
        raise Unauthorized("The enrollment token was already used.", code="enrollment_token_used")
    if token.expires_at <= timezone.now():
        raise Unauthorized("The enrollment token has expired.", code="enrollment_token_expired")
    if Node.objects.filter(name=req.name).exists():
        raise Conflict(f"A node named {req.name!r} already exists; choose another name.", code="node_name_taken")
    labels = {**token.labels, **req.labels}
    node = Node(
        name=req.name,
        region=token.region or req.region,
        labels=labels,
        hostname=req.hostname or hostname_hint,
        agent_version=req.agent_version,
        owner_project=token.project,
        trust=token.trust,
        **policy.resource_fields(req.resources),
    )
    secret = _new_credential(node)
    node = transitions.node_enrolled(node)
    token.used_at = timezone.now()
    token.node = node
    token.save(update_fields=["used_at", "node"])
    owner = token.project.name if token.project else "the platform"
    event(node, EventKind.ENROLLED, f"enrolled for {owner} as {node.trust}", data={"token_id": token.pk})
    audit.record(
        "node.enrolled",
        project=node.owner_project_id,
        target=f"node:{node.name}",
        actor=f"node:{node.name}",
        details={"trust": node.trust, "token_id": token.pk},
    )
    if token.auto_approve:
        with audit.context.acting(audit.context.SYSTEM):  # approved by the dev token, not by the enrolling node
            node = node_approve(node=node, trust=token.trust, public_pool=token.trust == TrustLevel.PLATFORM)
    return node, secret


# --- credentials ------------------------------------------------------------------------------
def _locked(node: Node) -> Node:
    return Node.objects.select_for_update().get(pk=node.pk)


@transaction.atomic
def node_revoke_credential(*, node: Node, by=None) -> Node:
    """The node's credential stops working at once; the agent must be enrolled again with a new token."""
    node = _locked(node)
    node.credential_lookup = None
    node.credential_digest = ""
    node.save(update_fields=["credential_lookup", "credential_digest"])
    event(node, EventKind.CREDENTIAL_REVOKED, "credential revoked", by=by)
    audit.record("node.credential_revoked", project=node.owner_project_id, target=f"node:{node.name}", by=by)
    return node


@transaction.atomic
def node_rotate_credential(*, node: Node, by=None) -> tuple[Node, str]:
    """A new credential replaces the old one (which stops working); returned once."""
    node = _locked(node)
    secret = _new_credential(node)
    node.save(update_fields=["credential_lookup", "credential_digest"])
    event(node, EventKind.CREDENTIAL_ROTATED, "credential rotated", by=by)
    audit.record("node.credential_rotated", project=node.owner_project_id, target=f"node:{node.name}", by=by)
    return node, secret
