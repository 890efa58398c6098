"""Writes for nodes: enrollment tokens, enroll, approval operations, credentials. One function per operation,
used by the API, the admin and the commands alike."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

import audit
import audit.context
from euler import tokens
from euler.errors import Conflict, Forbidden, InvalidInput, NotFound, Unauthorized
from nodeagent import protocol
from nodes import channel, policy
from nodes.auth import CREDENTIAL_PREFIX, ENROLLMENT_PREFIX
from nodes.models import Approval, EnrollmentToken, EventKind, Node, NodeEvent, TrustLevel
from nodes.signals import node_available, send_on_commit

PROJECT_TRUST_LEVELS = frozenset({TrustLevel.UNTRUSTED, TrustLevel.COMMUNITY})


def _event(node: Node, kind: str, message: str = "", *, by=None, data: dict | None = None) -> NodeEvent:
    by = by if getattr(by, "pk", None) else None
    return NodeEvent.objects.create(node=node, kind=kind, message=message[:1000], by=by, data=data or {})


def _trust(value) -> str:
    if value not in TrustLevel.values:
        raise InvalidInput(f"trust must be one of {', '.join(TrustLevel.values)}.", code="invalid_trust")
    return value


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
    trust = _trust(trust)
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
        online=True,  # the enrollment is its first sign of life (liveness.enrolled primes Redis with it)
        last_heartbeat_at=timezone.now(),
        **policy.resource_fields(req.resources),
    )
    secret = _new_credential(node)
    try:
        with transaction.atomic():
            node.save()
    except IntegrityError:
        raise Conflict(f"A node named {req.name!r} already exists.", code="node_name_taken") from None
    token.used_at = timezone.now()
    token.node = node
    token.save(update_fields=["used_at", "node"])
    owner = token.project.name if token.project else "the platform"
    _event(node, EventKind.ENROLLED, f"enrolled for {owner} as {node.trust}", data={"token_id": token.pk})
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


# --- approval operations ----------------------------------------------------------------------
def _locked(node: Node) -> Node:
    return Node.objects.select_for_update().get(pk=node.pk)


def _changed(node: Node) -> None:
    send_on_commit(node_available, node.pk)
    transaction.on_commit(lambda: channel.wake(node.pk))


_APPROVAL_FIELDS = ["trust", "public_pool", "approval", "approved_at", "gpu_fingerprint", *policy.PINNED]
_APPROVAL_FIELDS += [f"approved_{key}" for key in policy.PINNED] + ["pending_capacity"]


def _approve_fields(node: Node, trust: str | None, public_pool: bool | None) -> None:
    if trust is not None:
        node.trust = _trust(trust)
    if public_pool is None:
        public_pool = node.public_pool or node.trust == TrustLevel.PLATFORM
    if public_pool and node.trust == TrustLevel.UNTRUSTED:
        raise InvalidInput(
            "An untrusted node cannot join the public pool; make it community first.", code="untrusted_not_public"
        )
    node.public_pool = public_pool
    if node.approval != Approval.APPROVED:  # approving a node pins what it reports; re-approving keeps the pin
        for key, value in policy.capacity_to_pin(node).items():
            setattr(node, key, value)
            setattr(node, f"approved_{key}", value)
        node.pending_capacity = {}
    node.approval = Approval.APPROVED
    node.approved_at = timezone.now()
    node.gpu_fingerprint = policy.gpu_fingerprint(node.gpus)


def _approved_message(node: Node) -> str:
    return f"approved as {node.trust}, public pool {'yes' if node.public_pool else 'no'}"


def _audit_approved(node: Node, by) -> None:
    audit.record(
        "node.approved",
        project=node.owner_project_id,
        target=f"node:{node.name}",
        by=by,
        details={"trust": node.trust, "public_pool": node.public_pool},
    )


@transaction.atomic
def node_approve(*, node: Node, by=None, trust: str | None = None, public_pool: bool | None = None) -> Node:
    """Approve (or re-approve after a GPU change): pins the current GPU set."""
    node = _locked(node)
    _approve_fields(node, trust, public_pool)
    node.save(update_fields=_APPROVAL_FIELDS)
    _event(node, EventKind.APPROVED, _approved_message(node), by=by)
    _audit_approved(node, by)
    _changed(node)
    return node


@transaction.atomic
def node_approve_many(*, nodes, by=None, trust: str | None = None, public_pool: bool | None = None) -> list[Node]:
    """`node_approve` for many nodes in one transaction (the admin's bulk action, a pool enrolled at once): the
    same checks, events and audit records, but the rows in a few UPDATEs, and after the commit one
    invalidation and one scheduling request rather than a round of each per node."""
    locked = list(Node.objects.select_for_update().filter(pk__in=[n.pk for n in nodes]).order_by("pk"))
    for node in locked:
        _approve_fields(node, trust, public_pool)
    Node.objects.bulk_update(locked, _APPROVAL_FIELDS, batch_size=500)
    who = by if getattr(by, "pk", None) else None
    NodeEvent.objects.bulk_create(
        [NodeEvent(node=n, kind=EventKind.APPROVED, message=_approved_message(n), by=who, data={}) for n in locked],
        batch_size=500,
    )
    for node in locked:
        _audit_approved(node, by)
    ids = [n.pk for n in locked]
    if ids:
        from nodes import liveness

        liveness._bump_quietly(*ids)  # now and after the commit, as a saved row does (signals.node_row_changed)

        def after() -> None:
            liveness._bump_quietly(*ids)
            # No wake-ups: an approval gives a node no work by itself, and the pass below wakes the nodes it
            # places work on (waking thousands of polls only had each ask the database for nothing).
            node_available.send(sender=Node, node_id=ids[0])  # one scheduling pass looks at every node

        transaction.on_commit(after)
    return locked


@transaction.atomic
def node_reject(*, node: Node, by=None) -> Node:
    """Reject: the node's credential stops working (401 node_rejected) and it gets no work."""
    node = _locked(node)
    node.approval = Approval.REJECTED
    node.public_pool = False
    node.save(update_fields=["approval", "public_pool"])
    _event(node, EventKind.REJECTED, "rejected", by=by)
    audit.record("node.rejected", project=node.owner_project_id, target=f"node:{node.name}", by=by)
    transaction.on_commit(lambda: channel.wake(node.pk))
    return node


@transaction.atomic
def node_set_trust(*, node: Node, trust: str, by=None) -> Node:
    node = _locked(node)
    before, node.trust = node.trust, _trust(trust)
    if node.trust == TrustLevel.UNTRUSTED:
        node.public_pool = False
    node.save(update_fields=["trust", "public_pool"])
    _event(node, EventKind.TRUST_CHANGED, f"trust {before} → {node.trust}", by=by)
    audit.record(
        "node.trust_changed",
        project=node.owner_project_id,
        target=f"node:{node.name}",
        by=by,
        details={"from": before, "to": node.trust},
    )
    _changed(node)
    return node


@transaction.atomic
def node_set_public_pool(*, node: Node, public: bool, by=None) -> Node:
    node = _locked(node)
    if public and node.trust == TrustLevel.UNTRUSTED:
        raise InvalidInput(
            "An untrusted node cannot join the public pool; make it community first.", code="untrusted_not_public"
        )
    node.public_pool = public
    node.save(update_fields=["public_pool"])
    _event(
        node, EventKind.POOL_CHANGED, "admitted to the public pool" if public else "removed from the public pool", by=by
    )
    audit.record(
        "node.public_pool_changed",
        project=node.owner_project_id,
        target=f"node:{node.name}",
        by=by,
        details={"public_pool": public},
    )
    _changed(node)
    return node


@transaction.atomic
def node_drain(*, node: Node, by=None) -> Node:
    """No new placements; running work finishes."""
    node = _locked(node)
    if not node.draining:
        node.draining = True
        node.save(update_fields=["draining"])
        _event(node, EventKind.DRAINED, "draining: no new work", by=by)
        audit.record("node.drained", project=node.owner_project_id, target=f"node:{node.name}", by=by)
    return node


@transaction.atomic
def node_undrain(*, node: Node, by=None) -> Node:
    node = _locked(node)
    if node.draining:
        node.draining = False
        node.save(update_fields=["draining"])
        _event(node, EventKind.UNDRAINED, "accepting work again", by=by)
        audit.record("node.undrained", project=node.owner_project_id, target=f"node:{node.name}", by=by)
        _changed(node)
    return node


@transaction.atomic
def node_revoke_credential(*, node: Node, by=None) -> Node:
    """The node's credential stops working at once; the agent must be enrolled again with a new token."""
    node = _locked(node)
    node.credential_lookup = None
    node.credential_digest = ""
    node.save(update_fields=["credential_lookup", "credential_digest"])
    _event(node, EventKind.CREDENTIAL_REVOKED, "credential revoked", by=by)
    audit.record("node.credential_revoked", project=node.owner_project_id, target=f"node:{node.name}", by=by)
    return node


@transaction.atomic
def node_rotate_credential(*, node: Node, by=None) -> tuple[Node, str]:
    """A new credential replaces the old one (which stops working); returned once."""
    node = _locked(node)
    secret = _new_credential(node)
    node.save(update_fields=["credential_lookup", "credential_digest"])
    _event(node, EventKind.CREDENTIAL_ROTATED, "credential rotated", by=by)
    audit.record("node.credential_rotated", project=node.owner_project_id, target=f"node:{node.name}", by=by)
    return node, secret
