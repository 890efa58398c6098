"""The hot path (heartbeats) and offline detection."""

from __future__ import annotations

import logging
import time
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from nodeagent import protocol
from nodes import channel, policy
from nodes.models import Approval, EventKind, Node, NodeEvent
from nodes.signals import node_available, node_offline, send_on_commit

log = logging.getLogger(__name__)

_COUNT_TTL = 10.0
_count_cache: tuple[float, int] = (0.0, 0)


def active_node_count() -> int:
    """Nodes that heartbeat (not rejected), cached per process for a few seconds: the interval does not
    need to be exact and the hot path should not count rows."""
    global _count_cache
    now = time.monotonic()
    at, count = _count_cache
    if now - at > _COUNT_TTL:
        count = Node.objects.exclude(approval=Approval.REJECTED).count()
        _count_cache = (now, count)
    return count


def next_interval() -> float:
    return policy.heartbeat_interval(
        active_node_count(),
        min_interval=settings.EULER_NODE_HEARTBEAT_MIN_INTERVAL,
        max_rate=settings.EULER_NODE_HEARTBEAT_MAX_RATE,
        offline_after=settings.EULER_NODE_OFFLINE_AFTER,
        jitter=settings.EULER_NODE_HEARTBEAT_JITTER,
    )


def node_heartbeat(*, node: Node, hb: protocol.Heartbeat) -> protocol.HeartbeatReply:
    """Record a heartbeat: one conditional UPDATE of the node row on the usual path. Transitions (back
    online, GPU set changed, capacity changed) write an event and signal after commit."""
    now = timezone.now()
    res = hb.resources
    gpus = [g.model_dump() for g in res.gpus]
    fields = {
        "last_heartbeat_at": now,
        "online": True,
        "cpu_milli": res.cpu_milli,
        "memory_bytes": res.memory_bytes,
        "gpus": gpus,
        "docker_version": res.docker_version,
        "agent_version": hb.agent_version,
    }
    gpus_moved = (
        node.approval == Approval.APPROVED
        and node.gpu_fingerprint
        and policy.gpu_fingerprint(gpus) != node.gpu_fingerprint
    )
    came_back = not node.online
    capacity_changed = (
        node.cpu_milli != res.cpu_milli
        or node.memory_bytes != res.memory_bytes
        or policy.gpu_identity(node.gpus) != policy.gpu_identity(gpus)
    )
    if gpus_moved or came_back:
        with transaction.atomic():
            _transition(node, fields, gpus_moved=bool(gpus_moved), came_back=came_back, now=now)
    else:
        updated = Node.objects.filter(pk=node.pk).exclude(approval=Approval.REJECTED).update(**fields)
        if updated == 1 and capacity_changed and node.approval == Approval.APPROVED:
            node_available.send(sender=Node, node_id=node.pk)
    for key, value in fields.items():
        setattr(node, key, value)
    commands = channel.heartbeat_commands(node, hb)
    return protocol.HeartbeatReply(
        approval=node.approval, draining=node.draining, heartbeat_interval=next_interval(), commands=commands
    )


def _transition(node: Node, fields: dict, *, gpus_moved: bool, came_back: bool, now) -> None:
    locked = Node.objects.select_for_update().get(pk=node.pk)
    if gpus_moved and locked.approval == Approval.APPROVED:
        what = policy.describe_gpu_change(locked.gpus, fields["gpus"])
        fields = {**fields, "approval": Approval.PENDING}
        NodeEvent.objects.create(
            node=locked,
            kind=EventKind.GPUS_CHANGED,
            message=f"GPU set changed ({what}); back to pending until approved again",
            data={"before": policy.gpu_identity(locked.gpus), "after": policy.gpu_identity(fields["gpus"])},
        )
        node.approval = Approval.PENDING
        log.warning("node %s: GPU set changed (%s); back to pending", locked.name, what)
    if came_back and not locked.online:
        NodeEvent.objects.create(node=locked, kind=EventKind.ONLINE, message="heartbeat received; online")
        if fields.get("approval", locked.approval) == Approval.APPROVED:
            send_on_commit(node_available, locked.pk)
    Node.objects.filter(pk=locked.pk).update(**fields)


def mark_offline(*, now=None) -> list[int]:
    """Nodes silent for EULER_NODE_OFFLINE_AFTER go offline, each once (a conditional UPDATE), with an event
    and the node_offline signal after commit (the jobs app marks their attempts lost)."""
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=settings.EULER_NODE_OFFLINE_AFTER)
    candidates = list(
        Node.objects.filter(online=True, last_heartbeat_at__lt=cutoff)
        .exclude(approval=Approval.REJECTED)
        .values_list("pk", "name", "last_heartbeat_at")
    )
    gone = []
    for pk, name, last in candidates:
        with transaction.atomic():
            updated = Node.objects.filter(pk=pk, online=True, last_heartbeat_at__lt=cutoff).update(online=False)
            if updated != 1:
                continue  # a heartbeat got there first
            silent = (now - last).total_seconds()
            NodeEvent.objects.create(node_id=pk, kind=EventKind.OFFLINE, message=f"no heartbeat for {silent:.0f} s")
            send_on_commit(node_offline, pk)
        log.info("node %s offline: no heartbeat for %.0f s", name, silent)
        gone.append(pk)
    return gone
