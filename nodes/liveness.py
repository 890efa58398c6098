"""The hot path (heartbeats): liveness in Redis, the node row written only when something that matters changed.

A heartbeat from a node this process knows is one pipelined Redis round trip and no database work: the
credential is checked against the cached row, the last-seen time, the interval handed out and the reported
usage go to Redis, and the reply comes from the cached row. The full path (`full_heartbeat`, in a database
thread) runs when the process does not know the node, when its row changed (approval, draining, credential,
online: the generation in Redis moved), when what the node reports changed (the change fingerprint), or when
Redis does not answer (then the row is written every time, as before).

Beside it, one module per responsibility, none importing this one: the interval handed out (cadence.py), the
cached rows and their invalidation (memory.py), what this process learnt of each node's beats (beatmemo.py),
the other apps' hooks (beathooks.py), last-seen times and their batch flush (lastseen.py), the offline sweep
(offline.py), the answer from memory on the event loop (quickbeat.py), and every change of a node's state,
online included (transitions.py).
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.utils import timezone
from redis.exceptions import RedisError

from euler import metrics, tokens
from nodeagent import protocol
from nodes import beathooks, beatmemo, cadence, channel, gpuhealth, lastseen, livestore, memory, policy, transitions
from nodes.auth import CREDENTIAL_PREFIX, NodeRejected, authenticate_node
from nodes.models import Approval, Node
from nodes.signals import node_available

log = logging.getLogger(__name__)


# --- what a heartbeat reports ----------------------------------------------------------------------
def _row_fingerprint(node: Node, fields: dict) -> str:
    return policy.change_fingerprint({key: getattr(node, key) for key in fields})


def _reply(node: Node, interval: float, commands) -> protocol.HeartbeatReply:
    return protocol.HeartbeatReply(
        approval=node.approval,
        draining=node.draining,
        heartbeat_interval=interval,
        commands=list(commands),
        poll_wait=cadence.poll_wait_for(interval),
        gpu_resets=node.gpu_resets or {},
    )


# --- the fast path (no database) ----------------------------------------------------------------------
@dataclass(frozen=True)
class Later:
    """What the fast path leaves to a database thread: the full path, or the hooks (`node` given)."""

    hb: protocol.Heartbeat
    node: Node | None = None
    rfp: str = ""
    now: float = 0.0
    interval: float = 0.0
    gap: bool = False  # heartbeats came back after none for a while (or into an emptied Redis)
    previous: float | None = None  # the newest heartbeat before this one, when known
    redis_down: bool = False  # Redis did not answer: write the row (through the cached one when there is one)
    swapped: bool = False  # the intake time was swapped already (`previous` is what it was)


def heartbeat(
    *, raw: str | None, parse: Callable[[], protocol.Heartbeat], who: str | None = None
) -> protocol.HeartbeatReply:
    """A heartbeat, all in the calling thread (the test client, WSGI)."""
    found = fast_heartbeat(raw=raw, parse=parse)
    return finish_heartbeat(raw=raw, found=found, parse=parse, who=who)


def fast_heartbeat(*, raw: str | None, parse: Callable[[], protocol.Heartbeat]):
    """The Redis-only part: a reply for a node this process knows and nothing changed; a `Later` when the
    full path or the hooks must run (database work, for another pool); None for a node it does not know."""
    found = memory.known_for(raw)
    if found is None:
        return None
    lookup, cached = found
    hb = parse()
    node = cached.node
    fields = policy.heartbeat_fields(hb, None)
    fp, rfp = policy.change_fingerprint(fields), policy.running_fp(hb)
    now = time.time()
    try:
        if cadence.registration_due():  # every few seconds per process: renew this process, learn the others
            cadence.register_web()
        interval = cadence.interval_now()
        usage = beatmemo.usage_json(policy.usage(hb))
        pipe = livestore.client().pipeline(transaction=False)
        livestore.queue_beat(pipe, node_id=node.pk, ts=now, interval=interval, usage=usage)
        results = pipe.execute()
    except RedisError:
        log.warning("heartbeat: Redis did not answer; writing the node row instead")
        return Later(hb=hb, redis_down=True)
    previous, state = livestore.as_float(results[0]), livestore.decode_hash(results[1])
    if state.get("v") != cached.gen or (state.get("fp") or cached.fp) != fp or not node.online:
        memory.forget(lookup)
        return Later(hb=hb, swapped=True, previous=previous)
    beatmemo.wrote(node.pk, interval, usage, now)
    if previous is None or now - previous > settings.EULER_NODE_OFFLINE_AFTER / 2:
        return Later(hb=hb, node=node, rfp=rfp, now=now, interval=interval, gap=True, previous=previous)
    beatmemo.noted_intake(now)
    last_run = livestore.as_float(state.get("hk"))
    beatmemo.hooks_ran(node.pk, state.get("rfp"), last_run)
    due = policy.hooks_due(running_changed=state.get("rfp") != rfp, last_run=last_run, now=now,
                           every=settings.EULER_NODE_HOOKS_EVERY)  # fmt: skip
    if due:
        return Later(hb=hb, node=node, rfp=rfp, now=now, interval=interval)
    return _reply(node, interval, [])


def finish_heartbeat(*, raw: str | None, found, parse: Callable[[], protocol.Heartbeat], who: str | None):
    """The database part of a heartbeat the fast path could not answer alone."""
    if isinstance(found, protocol.HeartbeatReply):
        return found
    if found is None:
        return full_heartbeat(raw, parse, who)
    if found.redis_down:
        mine = memory.known_for(raw)
        if mine is not None:
            return _write_through(raw, *mine, found.hb, who)
        return full_heartbeat(raw, lambda: found.hb, who)
    if found.node is None:
        return full_heartbeat(raw, lambda: found.hb, who, swapped=found.swapped, previous=found.previous)
    if found.gap:
        lastseen.note_resumed(found.now, found.previous, node_id=found.node.pk)
        beatmemo.noted_intake(found.now)
    commands = beathooks.run_hooks(found.node, found.hb, found.rfp, found.now)
    return _reply(found.node, found.interval, commands)


def _write_through(raw: str, lookup: str, known: memory.Known, hb: protocol.Heartbeat, who) -> protocol.HeartbeatReply:
    """Redis is down: the heartbeat goes to the row, as before liveness moved to Redis. One UPDATE conditional
    on every cached fact the reply depends on (credential, online, approval, draining, pinned GPUs); when one
    changed it matches nothing and the full path runs (it needs Redis for the rate limit: 5xx until it is back)."""
    node = copy.copy(known.node)
    fields = policy.pin_capacity(policy.heartbeat_fields(hb, timezone.now()), policy.approved_capacity(node))
    gpus_moved = policy.gpus_moved(node, fields["gpus"])
    updated = 0
    if not gpus_moved:
        updated = Node.objects.filter(
            pk=node.pk,
            credential_digest=node.credential_digest,
            online=True,
            approval=node.approval,
            draining=node.draining,
            gpu_fingerprint=node.gpu_fingerprint,
            **_pinned_as(node),
        ).update(**fields)
    if updated != 1:
        memory.forget(lookup)
        return full_heartbeat(raw, lambda: hb, who)
    for key, value in fields.items():
        setattr(node, key, value)
    return _reply(node, cadence.interval_now(), channel.heartbeat_commands(node, hb))


def enrolled(node: Node, req: protocol.EnrollRequest) -> None:
    """A node just enrolled (online from its enrollment, which reported what a heartbeat does): its liveness in
    Redis (last seen, a generation, the fingerprint of what it reported, its hooks run with nothing listed)
    and its row in this process's cache, so that its first heartbeat is an ordinary one rather than a full
    path of its own; thousands of nodes enrolling at once would otherwise cost two database paths each."""
    taken = memory.token()
    now = time.time()
    fp, rfp = policy.change_fingerprint(policy.heartbeat_fields(req, None)), policy.running_fingerprint([])
    interval = cadence.interval_now()
    usage = policy.usage(protocol.Heartbeat(agent_version=req.agent_version, resources=req.resources))
    try:
        gen = livestore.claim_generation(node.pk) or livestore.generation(node.pk)
        pipe = livestore.client().pipeline(transaction=False)
        pipe.zadd(f"{livestore.ns()}seen", {str(node.pk): now})
        pipe.hset(livestore.node_key(node.pk), mapping={"fp": fp, "iv": interval, "u": beatmemo.usage_json(usage)})
        livestore.queue_hooks_ran(pipe, node_id=node.pk, running_fp=rfp, at=now)
        pipe.execute()
    except RedisError:
        return  # its first heartbeat takes the full path
    if gen and node.credential_lookup:
        memory.note_pk(node.credential_lookup, node.pk)
        memory.remember(node.credential_lookup, memory.Known(node=copy.copy(node), gen=gen, fp=fp), taken)
        beatmemo.hooks_ran(node.pk, rfp, now)
        beatmemo.wrote(node.pk, interval, beatmemo.usage_json(usage), now)


# --- the full path (a database thread) ------------------------------------------------------------------
def full_heartbeat(
    raw: str | None,
    parse: Callable[[], protocol.Heartbeat],
    who: str | None,
    *,
    swapped: bool = False,
    previous: float | None = None,
):
    """Authenticate from the database, write the row if something that matters changed (every time when
    Redis is down), run the hooks, and cache the row under its generation. `swapped`: the fast path swapped
    the intake time already (`previous`: what it was)."""
    metrics.inc("euler_heartbeats_full_total")
    lookup = tokens.split(CREDENTIAL_PREFIX, raw or "")
    taken = memory.token()
    # The generation is read before the row: a change committed after this read moves it again. A node seen
    # before (its id known by its credential) needs one read of its row, else the second one below.
    pk = memory.pk_of(lookup) if lookup else None
    gen, redis_ok = _generation(pk) if pk is not None else (None, True)
    node = authenticate_node(raw, who=who)
    hb = parse()
    if pk != node.pk:
        gen, redis_ok = _generation(node.pk)
        node = Node.objects.filter(pk=node.pk).first()
        if node is None or node.approval == Approval.REJECTED:
            raise NodeRejected()
        memory.note_pk(lookup, node.pk)
    if redis_ok and not swapped:
        # The intake first: it stamps the end of a control-plane gap before the row below can say this node is
        # back (an offline pass in between would see it back and the others silent, with no outage on record).
        try:
            previous = livestore.swap_intake(time.time())
        except RedisError:
            redis_ok = False
    reply_node, fp = node_heartbeat(node=node, hb=hb, force_write=not redis_ok)
    now = reply_node.last_heartbeat_at.timestamp()
    interval = cadence.next_interval() if redis_ok else cadence.interval_now()
    if redis_ok:
        try:
            usage = beatmemo.usage_json(policy.usage(hb))
            pipe = livestore.client().pipeline(transaction=False)
            livestore.queue_beat(pipe, node_id=node.pk, ts=now, interval=interval, usage=usage, intake=False)
            pipe.hset(livestore.node_key(node.pk), "fp", fp)
            pipe.execute()
            lastseen.note_resumed(now, previous, node_id=node.pk)
            beatmemo.noted_intake(now)
            beatmemo.wrote(node.pk, interval, usage, now)
        except RedisError:
            redis_ok = False
    commands = beathooks.run_hooks(reply_node, hb, policy.running_fp(hb), now)
    if redis_ok and gen and lookup:
        memory.remember(lookup, memory.Known(node=copy.copy(reply_node), gen=gen, fp=fp), taken)
    return _reply(reply_node, interval, commands)


def _generation(pk: int) -> tuple[str | None, bool]:
    """(the node's generation, claimed if it had none; whether Redis answered)."""
    try:
        return livestore.generation(pk) or livestore.claim_generation(pk), True
    except RedisError:
        return None, False


def node_heartbeat(*, node: Node, hb: protocol.Heartbeat, force_write: bool = False) -> tuple[Node, str]:
    """Write the heartbeat to the row when something that matters changed (or `force_write`): one conditional
    UPDATE, or a locked transition (back online, GPU set changed: transitions.heartbeat_transition) with an event
    and a signal after commit. Returns the node as it now is, and the change fingerprint."""
    now = timezone.now()
    reported = policy.heartbeat_fields(hb, now)
    fp = policy.change_fingerprint(reported)  # of what the node reports: the fast path compares the same
    fields = policy.pin_capacity(reported, policy.approved_capacity(node))
    gpus_moved = policy.gpus_moved(node, fields["gpus"])
    changed = policy.change_fingerprint(fields) != _row_fingerprint(node, fields)
    if gpus_moved or not node.online:
        fields = transitions.heartbeat_transition(node, reported, gpus_moved=gpus_moved, came_back=not node.online)
    elif changed or force_write:
        # Conditional on what was read: still online (an offline sweep between our read and this write has
        # its way, and the node comes back through the transition, with its event), not rejected, and the
        # pinned capacity the report was clamped to (an approval in between matches nothing; the node's next
        # heartbeat, its cached row invalidated, writes it again under the new figures).
        updated = (
            Node.objects.filter(pk=node.pk, online=True, **_pinned_as(node))
            .exclude(approval=Approval.REJECTED)
            .update(**fields)
        )
        went_offline = Node.objects.filter(pk=node.pk, online=False).exclude(approval=Approval.REJECTED)
        if updated != 1 and went_offline.exists():
            fields = transitions.heartbeat_transition(node, reported, gpus_moved=False, came_back=True)
        elif updated == 1 and changed:
            _changed_quietly(node.pk)
            if node.approval == Approval.APPROVED:
                node_available.send(sender=Node, node_id=node.pk)
    else:
        fields = {"last_heartbeat_at": now}  # nothing written: the batch flush lands it
    if "gpus" in fields:
        gpuhealth.record_changes(node, node.gpus, fields["gpus"])  # a GPU turned (un)healthy: its event
    for key, value in fields.items():
        setattr(node, key, value)
    return node, fp


def _pinned_as(node: Node) -> dict:
    """The filter that matches the row only while its pinned capacity is the one `node` holds."""
    return {
        f"approved_{key}__isnull" if value is None else f"approved_{key}": True if value is None else value
        for key, value in policy.approved_capacity(node).items()
    }


def _changed_quietly(node_id: int) -> None:
    """This process wrote what a node reports (capacity, versions): other processes drop their copy."""
    try:
        livestore.invalidate([node_id], origin=livestore.PROCESS_ID)
    except RedisError:
        log.warning("could not tell web processes that node %s changed", node_id)


# The callers that know these by this module (the node API, the tasks, the admin and API views).
from nodes.cadence import next_interval, poll_wait_for  # noqa: E402, F401
from nodes.lastseen import flush_seen, live_last_seen, note_intake  # noqa: E402, F401
from nodes.offline import mark_offline  # noqa: E402, F401
