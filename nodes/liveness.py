"""The hot path (heartbeats) and offline detection."""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone
from redis.exceptions import RedisError

from euler import redis as euler_redis
from euler import tokens
from nodeagent import protocol
from nodes import channel, policy
from nodes.auth import CREDENTIAL_PREFIX, authenticate_node
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


# What this process last knew of each node, by credential lookup. Never trusted on its own: the fast
# path's UPDATE is conditional on every cached fact the reply depends on (credential, online, approval,
# draining, pinned GPUs); when one changed, the UPDATE matches nothing and the full path runs.
_known: OrderedDict[str, Node] = OrderedDict()
_known_lock = threading.Lock()
_KNOWN_MAX = 100_000


def _remember(lookup: str, node: Node) -> None:
    with _known_lock:
        _known[lookup] = node
        _known.move_to_end(lookup)
        while len(_known) > _KNOWN_MAX:
            _known.popitem(last=False)


def _forget(lookup: str) -> None:
    with _known_lock:
        _known.pop(lookup, None)


def _heartbeat_fields(hb: protocol.Heartbeat, now) -> dict:
    res = hb.resources
    return {
        "last_heartbeat_at": now,
        "online": True,
        "cpu_milli": res.cpu_milli,
        "memory_bytes": res.memory_bytes,
        "gpus": [g.model_dump() for g in res.gpus],
        "docker_version": res.docker_version,
        "agent_version": hb.agent_version,
        "disk_bytes": res.disk_bytes,
        "capped": list(res.capped),
        "job_egress": res.job_egress,
        "job_egress_error": res.job_egress_error,
    }


def heartbeat(
    *, raw: str | None, parse: Callable[[], protocol.Heartbeat], who: str | None = None
) -> protocol.HeartbeatReply:
    """A heartbeat from a presented credential: one conditional UPDATE when nothing changed since this
    process last saw the node, else authentication and the full path (`node_heartbeat`)."""
    lookup = tokens.split(CREDENTIAL_PREFIX, raw or "")
    with _known_lock:
        known = _known.get(lookup) if lookup else None
    if known is not None and tokens.matches(raw, known.credential_digest):
        note_intake()
        hb = parse()
        reply = _fast_heartbeat(lookup, known, hb)
        if reply is not None:
            return reply
        _forget(lookup)
    node = authenticate_node(raw, who=who)
    note_intake()
    hb = parse()
    reply = node_heartbeat(node=node, hb=hb)
    _remember(lookup, copy.copy(node))
    return reply


def _fast_heartbeat(lookup: str, known: Node, hb: protocol.Heartbeat) -> protocol.HeartbeatReply | None:
    fields = _heartbeat_fields(hb, timezone.now())
    if (
        known.approval == Approval.APPROVED
        and known.gpu_fingerprint
        and policy.gpu_fingerprint(fields["gpus"]) != known.gpu_fingerprint
    ):
        return None  # the GPU set changed: the full path sends the node back to pending
    updated = Node.objects.filter(
        pk=known.pk,
        credential_digest=known.credential_digest,
        online=True,
        approval=known.approval,
        draining=known.draining,
        gpu_fingerprint=known.gpu_fingerprint,
    ).update(**fields)
    if updated != 1:
        return None
    capacity_changed = (
        known.cpu_milli != fields["cpu_milli"]
        or known.memory_bytes != fields["memory_bytes"]
        or known.disk_bytes != fields["disk_bytes"]
        or known.job_egress_error != fields["job_egress_error"]
        or policy.gpu_identity(known.gpus) != policy.gpu_identity(fields["gpus"])
    )
    node = copy.copy(known)
    for key, value in fields.items():
        setattr(node, key, value)
    if capacity_changed:
        _remember(lookup, copy.copy(node))
        if node.approval == Approval.APPROVED:
            node_available.send(sender=Node, node_id=node.pk)
    return protocol.HeartbeatReply(
        approval=node.approval,
        draining=node.draining,
        heartbeat_interval=next_interval(),
        commands=channel.heartbeat_commands(node, hb),
    )


def node_heartbeat(*, node: Node, hb: protocol.Heartbeat) -> protocol.HeartbeatReply:
    """Record a heartbeat: one conditional UPDATE of the node row on the usual path. Transitions (back
    online, GPU set changed, capacity changed) write an event and signal after commit."""
    now = timezone.now()
    res = hb.resources
    fields = _heartbeat_fields(hb, now)
    gpus = fields["gpus"]
    gpus_moved = (
        node.approval == Approval.APPROVED
        and node.gpu_fingerprint
        and policy.gpu_fingerprint(gpus) != node.gpu_fingerprint
    )
    came_back = not node.online
    capacity_changed = (
        node.cpu_milli != res.cpu_milli
        or node.memory_bytes != res.memory_bytes
        or node.disk_bytes != res.disk_bytes
        or node.job_egress_error != res.job_egress_error
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


def _control_plane_silence(candidates: list[tuple], now) -> bool:
    """Every online node (two or more) went silent together: far likelier that heartbeats cannot reach us
    (web tier down, a network cut on our side) than that all machines died at once. Hold for up to
    EULER_NODE_SILENCE_HOLD seconds after the newest heartbeat rather than declaring every attempt lost."""
    online = Node.objects.filter(online=True).exclude(approval=Approval.REJECTED).count()
    if len(candidates) < 2 or len(candidates) != online:
        return False
    newest = max(last for _, _, last in candidates)
    silent = (now - newest).total_seconds()
    if silent >= settings.EULER_NODE_OFFLINE_AFTER + settings.EULER_NODE_SILENCE_HOLD:
        return False
    log.warning(
        "all %d online nodes silent for %.0f s: heartbeats are probably not reaching the control plane; "
        "not marking them offline before %.0f s of silence",
        online,
        silent,
        settings.EULER_NODE_OFFLINE_AFTER + settings.EULER_NODE_SILENCE_HOLD,
    )
    return True


RESUMED_KEY = "euler:nodes:resumed"  # "resumed,last": heartbeats came back at `resumed` after none since `last`
_intake_noted = 0.0


def note_intake(now=None) -> None:
    """On every heartbeat, before it is stored; looks at most once a second per process. No heartbeat from any
    node for half the offline window is the control plane's outage (web down, a network cut on our side):
    when heartbeats come back, remember when, in Redis (which may itself have restarted empty)."""
    global _intake_noted
    if now is None:
        mono = time.monotonic()
        if mono - _intake_noted < 1.0:
            return
        _intake_noted = mono
        now = timezone.now()
    last = Node.objects.aggregate(last=Max("last_heartbeat_at"))["last"]
    if last is None or (now - last).total_seconds() <= settings.EULER_NODE_OFFLINE_AFTER / 2:
        return
    try:
        ttl = int(4 * settings.EULER_NODE_OFFLINE_AFTER) + 60
        euler_redis.client().set(RESUMED_KEY, f"{now.timestamp()!r},{last.timestamp()!r}", ex=ttl)
    except RedisError:
        log.warning("could not note that heartbeats resumed", exc_info=True)


def _after_outage(candidates: list[tuple], now) -> list[tuple]:
    """Hosts reconnect one by one after a control-plane outage: a node silent when heartbeats came back gets a
    whole EULER_NODE_OFFLINE_AFTER from that moment, rather than being judged by its pre-outage heartbeat the
    instant another node returns (its attempts, often finished during the outage, would be lost and rerun)."""
    try:
        raw = euler_redis.client().get(RESUMED_KEY)
        resumed, before = (float(x) for x in raw.split(b"," if isinstance(raw, bytes) else ",")) if raw else (0, 0)
    except (RedisError, ValueError):
        return candidates
    if not resumed or now.timestamp() >= resumed + settings.EULER_NODE_OFFLINE_AFTER:
        return candidates
    # Held: nodes that were heartbeating until the outage began (not those already silent before it).
    since = before - settings.EULER_NODE_OFFLINE_AFTER / 2
    kept = [c for c in candidates if not since <= c[2].timestamp() < resumed]
    if len(kept) < len(candidates):
        log.info("%d silent nodes get until %.0f s after heartbeats resumed", len(candidates) - len(kept),
                 settings.EULER_NODE_OFFLINE_AFTER)  # fmt: skip
    return kept


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
    if candidates and _control_plane_silence(candidates, now):
        return []
    if candidates:
        candidates = _after_outage(candidates, now)
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
