"""The only code that changes a node's state: online, approval, drain, trust and pinned capacity. Each change
is a conditional UPDATE (or a locked row) that writes its NodeEvent in the same transaction."""

from __future__ import annotations

from django.db import transaction

import audit
from nodes import channel, policy
from nodes.models import Approval, EventKind, Node, NodeEvent
from nodes.signals import node_available, send_on_commit


def event(node: Node | int, kind: str, message: str = "", *, by=None, data: dict | None = None) -> NodeEvent:
    by = by if getattr(by, "pk", None) else None
    node_id = node if isinstance(node, int) else node.pk
    return NodeEvent.objects.create(node_id=node_id, kind=kind, message=message[:1000], by=by, data=data or {})


def changed(node: Node) -> None:
    """After the commit: a scheduling pass looks at the node, and its poll hears of the change."""
    send_on_commit(node_available, node.pk)
    transaction.on_commit(lambda: channel.wake(node.pk))


def _figures(values: dict) -> str:
    return ", ".join(f"{key} {value}" for key, value in sorted(values.items()))


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
    from nodes.signals import node_row_changed

    node_row_changed(sender=Node, instance=node)
