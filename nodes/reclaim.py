"""A lender takes the machine back: reclaim (no new placements; every running attempt stopped with its grace and
requeued elsewhere, no retry spent) and resume. The API (the lender, the operator), the console's "My machines"
page and the node itself (`euler-node reclaim`, with its credential) call these.

Who may lift a reclaim: whoever reclaimed it, or someone above (`AUTHORITY`: node < lender < operator). A node's
own requests may take itself back and resume its own reclaim, never one its lender or the operator made; nothing
else a node sends (heartbeats, enroll, polls) touches these fields.
"""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django.utils import timezone

import audit
from euler.errors import Conflict, InvalidInput
from nodes import signals
from nodes.models import EventKind, Node
from nodes.transitions import changed, event

NODE, LENDER, OPERATOR = "node", "lender", "operator"
AUTHORITY = {NODE: 0, LENDER: 1, OPERATOR: 2}


def may_resume(*, reclaimed_by: str, authority: str) -> bool:
    """Whether `authority` may lift a reclaim made by `reclaimed_by` (pure)."""
    return AUTHORITY[authority] >= AUTHORITY.get(reclaimed_by, AUTHORITY[OPERATOR])


def kept_authority(*, reclaimed_by: str, authority: str) -> str:
    """A second reclaim by someone above raises who must resume; one below changes nothing (pure)."""
    if reclaimed_by in AUTHORITY and AUTHORITY[reclaimed_by] >= AUTHORITY[authority]:
        return reclaimed_by
    return authority


def grace_value(value) -> int | None:
    """A reclaim's `grace` (seconds, 0..EULER_MAX_STOP_GRACE) or None (each job's own); 400 invalid_grace."""
    if value is None:
        return None
    limit = settings.EULER_MAX_STOP_GRACE
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= limit:
        raise InvalidInput(f"grace must be an integer number of seconds from 0 to {limit}.", code="invalid_grace")
    return value


@transaction.atomic
def node_reclaim(*, node: Node, authority: str, grace: int | None = None, by=None, actor: str | None = None) -> dict:
    """Take the node back: unavailable for placements until resumed; its running attempts stopped (SIGTERM, the grace
    — `grace` or each job's —, SIGKILL) and requeued without spending a retry. Recorded on the node (reclaimed_at,
    reclaim_count, a NodeEvent) and in the audit trail. Reclaiming a reclaimed node stops what still runs there."""
    grace = grace_value(grace)
    node = Node.objects.select_for_update().get(pk=node.pk)
    now = timezone.now()
    first = node.reclaimed_at is None
    node.reclaimed_by = kept_authority(reclaimed_by=node.reclaimed_by if not first else "", authority=authority)
    if first:
        node.reclaimed_at = now
        node.reclaim_count += 1
    node.save(update_fields=["reclaimed_at", "reclaimed_by", "reclaim_count"])
    who = actor or (f"{authority} {by.username}" if getattr(by, "username", None) else authority)
    stopped = 0
    for _receiver, answer in signals.node_reclaimed.send(sender=Node, node_id=node.pk, grace=grace, by=who):
        stopped += int(answer or 0)
    said = "each job's grace" if grace is None else f"{grace} s grace"
    event(node, EventKind.RECLAIMED, f"reclaimed by {who}: {stopped} attempts stopped ({said})", by=by,
          data={"grace": grace, "stopped": stopped, "authority": authority})  # fmt: skip
    audit.record(
        "node.reclaimed",
        project=node.owner_project_id,
        target=f"node:{node.name}",
        by=by,
        actor=actor,
        details={"grace": grace, "stopped": stopped, "authority": authority},
    )
    changed(node)
    return reclaim_state(node) | {"stopped": stopped}


@transaction.atomic
def node_resume(*, node: Node, authority: str, by=None, actor: str | None = None) -> dict:
    """Placements again, if `authority` may lift this reclaim (409 reclaimed_by_higher otherwise)."""
    node = Node.objects.select_for_update().get(pk=node.pk)
    if node.reclaimed_at is None:
        return reclaim_state(node)
    if not may_resume(reclaimed_by=node.reclaimed_by, authority=authority):
        raise Conflict(
            f"This node was reclaimed by its {node.reclaimed_by}; only they (or someone above) can resume it.",
            code="reclaimed_by_higher",
        )
    since = node.reclaimed_at
    node.reclaimed_at = None
    node.reclaimed_by = ""
    node.save(update_fields=["reclaimed_at", "reclaimed_by"])
    event(node, EventKind.RESUMED, f"resumed after the reclaim of {since.isoformat()}", by=by)
    audit.record(
        "node.resumed", project=node.owner_project_id, target=f"node:{node.name}", by=by, actor=actor, details={}
    )
    changed(node)
    return reclaim_state(node)


def reclaim_state(node: Node) -> dict:
    return {
        "id": node.pk,
        "name": node.name,
        "reclaimed": node.reclaimed_at is not None,
        "reclaimed_at": node.reclaimed_at,
        "reclaimed_by": node.reclaimed_by,
        "reclaim_count": node.reclaim_count,
    }


def wire(state: dict) -> dict:
    """`reclaim_state` as JSON (the node API answers without a serializer)."""
    at = state["reclaimed_at"]
    return state | {"reclaimed_at": at.isoformat() if at is not None else None}
