"""The only code that changes a node's state: online, approval, drain, trust and pinned capacity. Each change
locks the row (or is a conditional UPDATE that matches only the state it leaves) and writes its NodeEvent in the
same transaction; signals and wake-ups go out after the commit. The API, the admin, the commands, the heartbeat
paths and the offline sweep all call these."""

from __future__ import annotations

import logging

from django.db import IntegrityError, transaction
from django.utils import timezone

import audit
from euler.errors import Conflict, InvalidInput
from nodes import channel, livestore, memory, policy, signals
from nodes.models import Approval, EventKind, Node, NodeEvent, TrustLevel
from nodes.signals import node_available, send_on_commit

log = logging.getLogger(__name__)


def event(node: Node | int, kind: str, message: str = "", *, by=None, data: dict | None = None) -> NodeEvent:
    by = by if getattr(by, "pk", None) else None
    node_id = node if isinstance(node, int) else node.pk
    return NodeEvent.objects.create(node_id=node_id, kind=kind, message=message[:1000], by=by, data=data or {})


def changed(node: Node) -> None:
    """After the commit: a scheduling pass looks at the node, and its poll hears of the change."""
    send_on_commit(node_available, node.pk)
    transaction.on_commit(lambda: channel.wake(node.pk))


def trust_level(value) -> str:
    if value not in TrustLevel.values:
        raise InvalidInput(f"trust must be one of {', '.join(TrustLevel.values)}.", code="invalid_trust")
    return value


# --- approval operations ----------------------------------------------------------------------
def _locked(node: Node) -> Node:
    return Node.objects.select_for_update().get(pk=node.pk)


_APPROVAL_FIELDS = ["trust", "public_pool", "approval", "approved_at", "gpu_fingerprint", *policy.PINNED]
_APPROVAL_FIELDS += [f"approved_{key}" for key in policy.PINNED] + ["pending_capacity"]


def _approve_fields(node: Node, trust: str | None, public_pool: bool | None) -> None:
    if trust is not None:
        node.trust = trust_level(trust)
    if public_pool is None:
        public_pool = node.public_pool or node.trust == TrustLevel.PLATFORM
    if public_pool and node.trust == TrustLevel.UNTRUSTED:
        raise InvalidInput(
            "An untrusted node cannot join the public pool; make it community first.", code="untrusted_not_public"
        )
    node.public_pool = public_pool
    # Approving pins what the node reports; approving it again (after a GPU change, say) keeps the pin and what is
    # pending: the pending capacity has its own action, event and audit entry (node_capacity_approve).
    for key, value in policy.capacity_to_pin(node).items():
        setattr(node, key, value)
        setattr(node, f"approved_{key}", value)
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
    event(node, EventKind.APPROVED, _approved_message(node), by=by)
    _audit_approved(node, by)
    changed(node)
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
        livestore.bump_quietly(*ids)  # now and after the commit, as a saved row does (signals.node_row_changed)

        def after() -> None:
            livestore.bump_quietly(*ids)
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
    event(node, EventKind.REJECTED, "rejected", by=by)
    audit.record("node.rejected", project=node.owner_project_id, target=f"node:{node.name}", by=by)
    transaction.on_commit(lambda: channel.wake(node.pk))
    return node


@transaction.atomic
def node_set_trust(*, node: Node, trust: str, by=None) -> Node:
    node = _locked(node)
    before, node.trust = node.trust, trust_level(trust)
    if node.trust == TrustLevel.UNTRUSTED:
        node.public_pool = False
    node.save(update_fields=["trust", "public_pool"])
    event(node, EventKind.TRUST_CHANGED, f"trust {before} → {node.trust}", by=by)
    audit.record(
        "node.trust_changed",
        project=node.owner_project_id,
        target=f"node:{node.name}",
        by=by,
        details={"from": before, "to": node.trust},
    )
    changed(node)
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
    event(
        node, EventKind.POOL_CHANGED, "admitted to the public pool" if public else "removed from the public pool", by=by
    )
    audit.record(
        "node.public_pool_changed",
        project=node.owner_project_id,
        target=f"node:{node.name}",
        by=by,
        details={"public_pool": public},
    )
    changed(node)
    return node


@transaction.atomic
def node_drain(*, node: Node, by=None) -> Node:
    """No new placements; running work finishes."""
    node = _locked(node)
    if not node.draining:
        node.draining = True
        node.save(update_fields=["draining"])
        event(node, EventKind.DRAINED, "draining: no new work", by=by)
        audit.record("node.drained", project=node.owner_project_id, target=f"node:{node.name}", by=by)
    return node


@transaction.atomic
def node_undrain(*, node: Node, by=None) -> Node:
    node = _locked(node)
    if node.draining:
        node.draining = False
        node.save(update_fields=["draining"])
        event(node, EventKind.UNDRAINED, "accepting work again", by=by)
        audit.record("node.undrained", project=node.owner_project_id, target=f"node:{node.name}", by=by)
        changed(node)
    return node


def _figures(values: dict) -> str:
    def shown(value) -> str:
        if isinstance(value, list):  # runtimes: by name
            return "[" + ", ".join(str(v.get("name", v)) if isinstance(v, dict) else str(v) for v in value) + "]"
        return str(value)

    return ", ".join(f"{key} {shown(value)}" for key, value in sorted(values.items()))


@transaction.atomic
def node_capacity_approve(*, node: Node, by=None) -> Node:
    """Approve a node's pending capacity change: the figures it reported above the pinned ones become the pinned
    ones (and what the scheduler uses). Nothing pending: nothing changes."""
    locked = Node.objects.select_for_update().get(pk=node.pk)
    pending = {key: value for key, value in (locked.pending_capacity or {}).items() if key in policy.PINNED}
    if not pending or locked.approval != Approval.APPROVED:
        return locked
    before = {key: getattr(locked, f"approved_{key}") for key in pending}
    updates: dict = {"pending_capacity": {}}
    for key, value in pending.items():
        updates[key] = value
        updates[f"approved_{key}"] = value
    # Conditional on the pending figures it approves: a heartbeat that lowered them first wins.
    if Node.objects.filter(pk=locked.pk, pending_capacity=locked.pending_capacity).update(**updates) != 1:
        return Node.objects.get(pk=locked.pk)
    event(
        locked,
        EventKind.CAPACITY_APPROVED,
        f"capacity change approved: {_figures(before)} → {_figures(pending)}",
        by=by,
        data={"before": before, "after": pending},
    )
    audit.record(  # an approval of its capacity (no audit action of its own: audit/ keeps its choices)
        "node.approved",
        project=locked.owner_project_id,
        target=f"node:{locked.name}",
        by=by,
        details={"capacity": {"before": before, "after": pending}},
    )
    locked.refresh_from_db()
    _row_changed(locked)
    changed(locked)
    return locked


def _row_changed(node: Node) -> None:
    """A row written by UPDATE sends no post_save: tell the web processes' caches as a save would."""
    memory.node_row_changed(sender=Node, instance=node)


# --- online / offline ---------------------------------------------------------------------------------
def node_enrolled(node: Node) -> Node:
    """Save a newly enrolled node: online from its enrollment, its first sign of life (liveness.enrolled primes
    Redis with it). 409 node_name_taken when the name went to another node meanwhile."""
    node.online = True
    node.last_heartbeat_at = timezone.now()
    try:
        with transaction.atomic():
            node.save()
    except IntegrityError:
        raise Conflict(f"A node named {node.name!r} already exists.", code="node_name_taken") from None
    return node


def node_offline(*, node_id: int, name: str, last, floor, quiet: float) -> bool:
    """A node silent for its window goes offline, once: a conditional UPDATE (still online, not heard from since
    `floor`), its event, and node_offline after the commit (the jobs app marks its attempts lost)."""
    with transaction.atomic():
        updated = Node.objects.filter(pk=node_id, online=True, last_heartbeat_at__lt=floor).update(
            online=False, last_heartbeat_at=last
        )
        if updated != 1:
            return False  # a heartbeat (written to the row while Redis was down) got there first
        event(node_id, EventKind.OFFLINE, f"no heartbeat for {quiet:.0f} s")
        send_on_commit(signals.node_offline, node_id)
    log.info("node %s offline: no heartbeat for %.0f s", name, quiet)
    return True


@transaction.atomic
def heartbeat_transition(node: Node, reported: dict, *, gpus_moved: bool, came_back: bool) -> dict:
    """A heartbeat that changes the node's state, on the locked row: back online (its event, a scheduling pass),
    or a GPU set other than the approved one (back to pending, its event). Returns the reported fields as
    written (under the locked row's pinned capacity) and sets `node.approval`, `node.online` to the row's."""
    locked = Node.objects.select_for_update().get(pk=node.pk)
    fields = written = policy.pin_capacity(reported, policy.approved_capacity(locked))
    fields = {**fields, "online": True}
    if gpus_moved and locked.approval == Approval.APPROVED:
        what = policy.describe_gpu_change(locked.gpus, fields["gpus"])
        fields["approval"] = Approval.PENDING
        event(
            locked,
            EventKind.GPUS_CHANGED,
            f"GPU set changed ({what}); back to pending until approved again",
            data={"before": policy.gpu_identity(locked.gpus), "after": policy.gpu_identity(fields["gpus"])},
        )
        log.warning("node %s: GPU set changed (%s); back to pending", locked.name, what)
    if not locked.online:
        event(locked, EventKind.ONLINE, "heartbeat received; online")
        if fields.get("approval", locked.approval) == Approval.APPROVED:
            send_on_commit(node_available, locked.pk)
    Node.objects.filter(pk=locked.pk).update(**fields)
    node.approval, node.online = fields.get("approval", locked.approval), True
    transaction.on_commit(lambda: livestore.bump_quietly(locked.pk))  # other processes drop their copy
    return written
