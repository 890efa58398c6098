"""The hot path (heartbeats): liveness in Redis, the node row written only when something that matters changed.

A heartbeat from a node this process knows is one pipelined Redis round trip and no database work: the
credential is checked against the cached row, the last-seen time, the interval handed out and the reported
usage go to Redis, and the reply comes from the cached row. The full path (`full_heartbeat`, in a database
thread) runs when the process does not know the node, when its row changed (approval, draining, credential,
online: the generation in Redis moved), when what the node reports changed (the change fingerprint), or when
Redis does not answer (then the row is written every time, as before). `last_heartbeat_at` trails Redis by
a batch flush (`flush_seen`); offline detection is in offline.py.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Max
from django.utils import timezone
from redis.exceptions import RedisError

from euler import metrics, tokens
from nodeagent import protocol
from nodes import channel, livestore, policy, quickbeat, webload
from nodes.auth import CREDENTIAL_PREFIX, NodeRejected, authenticate_node
from nodes.models import Approval, EventKind, Node, NodeEvent
from nodes.signals import node_available, send_on_commit

log = logging.getLogger(__name__)

_known_lock = threading.Lock()
_KNOWN_MAX = 100_000


@dataclass(frozen=True)
class Known:
    """This process's copy of a node row, valid while the node's generation in Redis is `gen`."""

    node: Node
    gen: str
    fp: str


_known: OrderedDict[str, Known] = OrderedDict()
_lookup_of: dict[int, str] = {}  # node id -> its credential's lookup in _known


def _remember(lookup: str, known: Known, taken: int | None = None) -> None:
    """Cache a node row; `taken` (quickbeat.token() before the row was read): not if it changed since."""
    with _known_lock:
        if taken is not None and not quickbeat.may_remember(known.node.pk, taken):
            return
        _known[lookup] = known
        _known.move_to_end(lookup)
        _lookup_of[known.node.pk] = lookup
        while len(_known) > _KNOWN_MAX:
            _, dropped = _known.popitem(last=False)
            _lookup_of.pop(dropped.node.pk, None)


def _forget(lookup: str) -> None:
    with _known_lock:
        dropped = _known.pop(lookup, None)
        if dropped is not None:
            _lookup_of.pop(dropped.node.pk, None)


def known(lookup: str) -> Known | None:
    """The cached row for a credential lookup. No lock: the hot paths read it on the event loop, and one
    OrderedDict lookup is atomic under the GIL (writers take _known_lock among themselves)."""
    return _known.get(lookup)


def known_for(raw: str | None) -> tuple[str, Known] | None:
    """The credential's lookup and this process's cached row for it, when the credential matches that row
    (the hot paths' authentication without the database); None otherwise."""
    lookup = tokens.split(CREDENTIAL_PREFIX, raw or "")
    cached = _known.get(lookup) if lookup else None
    if cached is None or not tokens.matches(raw, cached.node.credential_digest):
        return None
    return lookup, cached


def known_by_id(node_id: int) -> Known | None:
    lookup = _lookup_of.get(node_id)
    return _known.get(lookup) if lookup is not None else None


def forget_nodes(node_ids) -> list[int]:
    """Drop these nodes' cached rows; returns the ids of those that were cached."""
    dropped = []
    with _known_lock:
        for node_id in node_ids:
            lookup = _lookup_of.pop(node_id, None)
            if lookup is not None:
                _known.pop(lookup, None)
                dropped.append(node_id)
    return dropped


REFRESH_CHUNK = 1000


def refresh(node_ids) -> int:
    """Read nodes' rows into the cache in bulk, a chunk per query: those an invalidation dropped (a bulk approval
    would otherwise cost one full heartbeat per node in the minute after it), and every node Redis has seen when
    the subscription starts (a restarted web process would otherwise send each node's next heartbeat down the
    full path). Like the full path, the generation is read before the row, and a row invalidated after `taken`
    is not kept. Nodes Redis holds no generation or fingerprint for are left to the full path."""
    taken = quickbeat.token()
    ids = sorted(set(node_ids))
    kept = 0
    for i in range(0, len(ids), REFRESH_CHUNK):
        chunk = ids[i : i + REFRESH_CHUNK]
        try:
            pipe = livestore.client().pipeline(transaction=False)
            for node_id in chunk:
                pipe.hmget(livestore.node_key(node_id), "v", "fp")
            found = pipe.execute()
        except RedisError:
            return kept  # their next heartbeats take the full path
        rows = Node.objects.in_bulk(chunk)
        for node_id, (gen, fp) in zip(chunk, found, strict=True):
            node = rows.get(node_id)
            if node is None or node.approval == Approval.REJECTED or not gen or not fp or not node.credential_lookup:
                continue
            _remember(node.credential_lookup, Known(node=node, gen=livestore.text(gen), fp=livestore.text(fp)), taken)
            kept += 1
    return kept


def forget_all() -> None:
    with _known_lock:
        _known.clear()
        _lookup_of.clear()


# --- the interval: nodes ÷ the live web processes' budgets ------------------------------------------
_registry = {"at": -1e9, "nodes": 0, "budget": 0.0}


def registration_due() -> bool:
    return time.monotonic() - _registry["at"] >= settings.EULER_NODE_WEB_TTL / 3


_registration_due = registration_due


def _apply_registration(members: list, count: int) -> None:
    own = settings.EULER_NODE_HEARTBEAT_BUDGET
    members = [m.decode() if isinstance(m, bytes) else m for m in members]
    _registry.update(at=time.monotonic(), nodes=int(count), budget=policy.total_budget(members, own=own))


def interval_for(nodes: int, budget: float, *, jitter: float | None = None) -> float:
    """policy.heartbeat_interval with this deployment's settings: `nodes` sharing `budget` heartbeats/s."""
    return policy.heartbeat_interval(
        nodes,
        min_interval=settings.EULER_NODE_HEARTBEAT_MIN_INTERVAL,
        budget=budget or settings.EULER_NODE_HEARTBEAT_BUDGET,
        max_interval=settings.EULER_NODE_HEARTBEAT_MAX_INTERVAL,
        jitter=settings.EULER_NODE_HEARTBEAT_JITTER if jitter is None else jitter,
    )


def interval_now(*, jitter: float | None = None) -> float:
    """The interval from what this process last learnt (no I/O): nodes known to Redis ÷ total live budget."""
    return interval_for(_registry["nodes"], _registry["budget"], jitter=jitter)


def register_web() -> None:
    """Register this process's budget (sync callers; the async hot path piggybacks on its own round trip)."""
    try:
        members, count = livestore.registration(
            settings.EULER_NODE_HEARTBEAT_BUDGET, settings.EULER_NODE_WEB_TTL, load=webload.take()
        )
    except RedisError:
        log.warning("could not register the heartbeat budget in Redis")
        return
    _apply_registration(members, count)


def next_interval() -> float:
    if _registration_due():
        register_web()
    return interval_now()


# --- what a heartbeat reports ----------------------------------------------------------------------
def _heartbeat_fields(hb: protocol.Heartbeat, now) -> dict:
    """The node row's fields a heartbeat writes; the change fingerprint is computed over the same dict."""
    return {
        "last_heartbeat_at": now,
        "online": True,
        "agent_version": hb.agent_version,
        **policy.resource_fields(hb.resources),
    }


heartbeat_fields = _heartbeat_fields


def _row_fingerprint(node: Node, fields: dict) -> str:
    return policy.change_fingerprint({key: getattr(node, key) for key in fields})


def _usage(hb: protocol.Heartbeat) -> dict:
    gpus = [{"uuid": g.uuid, "utilization": g.utilization, "memory_used_bytes": g.memory_used_bytes}
            for g in hb.resources.gpus]  # fmt: skip
    return {"gpus": gpus, "running": len(hb.running)}


def _running_fp(hb: protocol.Heartbeat) -> str:
    return policy.running_fingerprint([(r.attempt_id, r.state) for r in hb.running])


usage, running_fp = _usage, _running_fp


def poll_wait_for(interval: float) -> float:
    """policy.poll_wait with this deployment's settings."""
    cap = min(settings.EULER_NODE_POLL_WAIT_MAX, protocol.POLL_WAIT_MAX_SECONDS)
    return policy.poll_wait(interval, floor=protocol.POLL_WAIT_SECONDS, cap=cap)


def _reply(node: Node, interval: float, commands) -> protocol.HeartbeatReply:
    return protocol.HeartbeatReply(
        approval=node.approval,
        draining=node.draining,
        heartbeat_interval=interval,
        commands=list(commands),
        poll_wait=poll_wait_for(interval),
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


def heartbeat(
    *, raw: str | None, parse: Callable[[], protocol.Heartbeat], who: str | None = None
) -> protocol.HeartbeatReply:
    """A heartbeat, all in the calling thread (the test client, WSGI)."""
    found = fast_heartbeat(raw=raw, parse=parse)
    return finish_heartbeat(raw=raw, found=found, parse=parse, who=who)


def fast_heartbeat(*, raw: str | None, parse: Callable[[], protocol.Heartbeat]):
    """The Redis-only part: a reply for a node this process knows and nothing changed; a `Later` when the
    full path or the hooks must run (database work, for another pool); None for a node it does not know."""
    found = known_for(raw)
    if found is None:
        return None
    lookup, cached = found
    hb = parse()
    node = cached.node
    fields = _heartbeat_fields(hb, None)
    fp, rfp = policy.change_fingerprint(fields), _running_fp(hb)
    now = time.time()
    try:
        if _registration_due():  # every few seconds per process: renew this process, learn the others
            register_web()
        interval = interval_now()
        usage = quickbeat.usage_json(_usage(hb))
        pipe = livestore.client().pipeline(transaction=False)
        livestore.queue_beat(pipe, node_id=node.pk, ts=now, interval=interval, usage=usage)
        results = pipe.execute()
    except RedisError:
        log.warning("heartbeat: Redis did not answer; writing the node row instead")
        return Later(hb=hb, redis_down=True)
    state = livestore.decode_hash(results[0])
    if state.get("v") != cached.gen or (state.get("fp") or cached.fp) != fp or not node.online:
        _forget(lookup)
        return Later(hb=hb)
    previous = livestore.as_float(results[3])
    quickbeat.wrote(node.pk, interval, usage, now)
    if previous is None or now - previous > settings.EULER_NODE_OFFLINE_AFTER / 2:
        return Later(hb=hb, node=node, rfp=rfp, now=now, interval=interval, gap=True, previous=previous)
    quickbeat.noted_intake(now)
    last_run = livestore.as_float(state.get("hk"))
    quickbeat.hooks_ran(node.pk, state.get("rfp"), last_run)
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
        mine = known_for(raw)
        if mine is not None:
            return _write_through(raw, *mine, found.hb, who)
        return full_heartbeat(raw, lambda: found.hb, who)
    if found.node is None:
        return full_heartbeat(raw, lambda: found.hb, who)
    if found.gap:
        _note_resumed(found.now, found.previous)
        quickbeat.noted_intake(found.now)
    commands = _run_hooks(found.node, found.hb, found.rfp, found.now)
    return _reply(found.node, found.interval, commands)


def _write_through(raw: str, lookup: str, known: Known, hb: protocol.Heartbeat, who) -> protocol.HeartbeatReply:
    """Redis is down: the heartbeat goes to the row, as before liveness moved to Redis. One UPDATE conditional
    on every cached fact the reply depends on (credential, online, approval, draining, pinned GPUs); when one
    changed it matches nothing and the full path runs (it needs Redis for the rate limit: 5xx until it is back)."""
    node = copy.copy(known.node)
    fields = policy.pin_capacity(_heartbeat_fields(hb, timezone.now()), policy.approved_capacity(node))
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
        _forget(lookup)
        return full_heartbeat(raw, lambda: hb, who)
    for key, value in fields.items():
        setattr(node, key, value)
    return _reply(node, interval_now(), channel.heartbeat_commands(node, hb))


def _run_hooks(node: Node, hb: protocol.Heartbeat, rfp: str, now: float) -> list:
    """The other apps' heartbeat hooks; remembers when they ran, or that they want the next heartbeat too."""
    commands = channel.heartbeat_commands(node, hb)
    again = bool(commands) or getattr(commands, "again", False)
    try:
        pipe = livestore.client().pipeline(transaction=False)
        livestore.queue_hooks_ran(pipe, node_id=node.pk, running_fp=rfp, at=0 if again else now)
        pipe.execute()
    except RedisError:
        return list(commands)  # they run again next time
    quickbeat.hooks_ran(node.pk, rfp, 0 if again else now)
    return list(commands)


def enrolled(node: Node, req: protocol.EnrollRequest) -> None:
    """A node just enrolled (online from its enrollment, which reported what a heartbeat does): its liveness in
    Redis (last seen, a generation, the fingerprint of what it reported, its hooks run with nothing listed)
    and its row in this process's cache, so that its first heartbeat is an ordinary one rather than a full
    path of its own; thousands of nodes enrolling at once would otherwise cost two database paths each."""
    taken = quickbeat.token()
    now = time.time()
    fp, rfp = policy.change_fingerprint(_heartbeat_fields(req, None)), policy.running_fingerprint([])
    interval = interval_now()
    usage = _usage(protocol.Heartbeat(agent_version=req.agent_version, resources=req.resources))
    try:
        gen = livestore.claim_generation(node.pk) or livestore.generation(node.pk)
        pipe = livestore.client().pipeline(transaction=False)
        pipe.zadd(f"{livestore.ns()}seen", {str(node.pk): now})
        pipe.hset(livestore.node_key(node.pk), mapping={"fp": fp, "iv": interval, "u": quickbeat.usage_json(usage)})
        livestore.queue_hooks_ran(pipe, node_id=node.pk, running_fp=rfp, at=now)
        pipe.execute()
    except RedisError:
        return  # its first heartbeat takes the full path
    if gen and node.credential_lookup:
        _note_pk(node.credential_lookup, node.pk)
        _remember(node.credential_lookup, Known(node=copy.copy(node), gen=gen, fp=fp), taken)
        quickbeat.hooks_ran(node.pk, rfp, now)
        quickbeat.wrote(node.pk, interval, quickbeat.usage_json(usage), now)


def hooks_in_background(node: Node, body: bytes, rfp: str, now: float) -> None:
    """quickbeat.hooks_later's work: the hooks for a heartbeat already answered; their commands make them due
    again (_run_hooks records `again`), so the node's next heartbeat runs them on its verifying path."""
    try:
        _run_hooks(node, protocol.Heartbeat.model_validate_json(body), rfp, now)
    except Exception:  # noqa: BLE001 - a pool thread: nobody else would see it
        log.exception("heartbeat hooks for node %s failed", node.pk)
        quickbeat.hooks_ran(node.pk, rfp, 0)  # due again at the next heartbeat


# --- the full path (a database thread) ------------------------------------------------------------------
def full_heartbeat(raw: str | None, parse: Callable[[], protocol.Heartbeat], who: str | None):
    """Authenticate from the database, write the row if something that matters changed (every time when
    Redis is down), run the hooks, and cache the row under its generation."""
    metrics.inc("euler_heartbeats_full_total")
    lookup = tokens.split(CREDENTIAL_PREFIX, raw or "")
    taken = quickbeat.token()
    # The generation is read before the row: a change committed after this read moves it again. A node seen
    # before (its id known by its credential) needs one read of its row, else the second one below.
    pk = _pk_of.get(lookup) if lookup else None
    gen, redis_ok = _generation(pk) if pk is not None else (None, True)
    node = authenticate_node(raw, who=who)
    hb = parse()
    if pk != node.pk:
        gen, redis_ok = _generation(node.pk)
        node = Node.objects.filter(pk=node.pk).first()
        if node is None or node.approval == Approval.REJECTED:
            raise NodeRejected()
        _note_pk(lookup, node.pk)
    reply_node, fp = node_heartbeat(node=node, hb=hb, force_write=not redis_ok)
    now = reply_node.last_heartbeat_at.timestamp()
    interval = next_interval() if redis_ok else interval_now()
    if redis_ok:
        try:
            usage = quickbeat.usage_json(_usage(hb))
            pipe = livestore.client().pipeline(transaction=False)
            livestore.queue_beat(pipe, node_id=node.pk, ts=now, interval=interval, usage=usage)
            pipe.hset(livestore.node_key(node.pk), "fp", fp)
            previous = livestore.as_float(pipe.execute()[3])
            _note_resumed(now, previous)
            quickbeat.noted_intake(now)
            quickbeat.wrote(node.pk, interval, usage, now)
        except RedisError:
            redis_ok = False
    commands = _run_hooks(reply_node, hb, _running_fp(hb), now)
    if redis_ok and gen and lookup:
        _remember(lookup, Known(node=copy.copy(reply_node), gen=gen, fp=fp), taken)
    return _reply(reply_node, interval, commands)


_pk_of: dict[str, int] = {}  # credential lookup -> node id (never changes; a rotated credential has a new lookup)


def _note_pk(lookup: str | None, pk: int) -> None:
    if lookup:
        if len(_pk_of) >= _KNOWN_MAX:
            _pk_of.clear()
        _pk_of[lookup] = pk


def _generation(pk: int) -> tuple[str | None, bool]:
    """(the node's generation, claimed if it had none; whether Redis answered)."""
    try:
        return livestore.generation(pk) or livestore.claim_generation(pk), True
    except RedisError:
        return None, False


def node_heartbeat(*, node: Node, hb: protocol.Heartbeat, force_write: bool = False) -> tuple[Node, str]:
    """Write the heartbeat to the row when something that matters changed (or `force_write`): one conditional
    UPDATE, or a locked transition (back online, GPU set changed) with an event and a signal after commit.
    Returns the node as it now is, and the change fingerprint."""
    now = timezone.now()
    reported = _heartbeat_fields(hb, now)
    fp = policy.change_fingerprint(reported)  # of what the node reports: the fast path compares the same
    fields = policy.pin_capacity(reported, policy.approved_capacity(node))
    gpus_moved = policy.gpus_moved(node, fields["gpus"])
    came_back = not node.online
    changed = policy.change_fingerprint(fields) != _row_fingerprint(node, fields)
    if gpus_moved or came_back:
        with transaction.atomic():
            fields = _transition(node, reported, gpus_moved=gpus_moved, came_back=came_back)
    elif changed or force_write:
        # Conditional on the pinned capacity it was clamped to: an approval in between matches nothing, and
        # the node's next heartbeat (its cached row invalidated) writes it again under the new figures.
        updated = (
            Node.objects.filter(pk=node.pk, **_pinned_as(node)).exclude(approval=Approval.REJECTED).update(**fields)
        )
        if updated == 1 and changed:
            _changed_quietly(node.pk)
        if updated == 1 and changed and node.approval == Approval.APPROVED:
            node_available.send(sender=Node, node_id=node.pk)
    else:
        fields = {"last_heartbeat_at": now}  # nothing written: the batch flush lands it
    for key, value in fields.items():
        setattr(node, key, value)
    return node, fp


def _transition(node: Node, reported: dict, *, gpus_moved: bool, came_back: bool) -> dict:
    """Returns the reported fields as written (under the locked row's pinned capacity)."""
    locked = Node.objects.select_for_update().get(pk=node.pk)
    fields = written = policy.pin_capacity(reported, policy.approved_capacity(locked))
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
    transaction.on_commit(lambda: _bump_quietly(locked.pk))  # other processes drop their copy
    return written


def _pinned_as(node: Node) -> dict:
    """The filter that matches the row only while its pinned capacity is the one `node` holds."""
    return {f"approved_{key}": value for key, value in policy.approved_capacity(node).items()}


def _changed_quietly(node_id: int) -> None:
    """This process wrote what a node reports (capacity, versions): other processes drop their copy."""
    try:
        livestore.invalidate([node_id], origin=livestore.PROCESS_ID)
    except RedisError:
        log.warning("could not tell web processes that node %s changed", node_id)


def _bump_quietly(*node_ids: int) -> None:
    try:
        livestore.bump(*node_ids)
    except RedisError:
        log.warning("could not tell web processes that nodes %s changed", node_ids)


# --- control-plane gaps -----------------------------------------------------------------------------
def note_intake(now=None) -> None:
    """Record a heartbeat's arrival (the fast path does this inside its round trip)."""
    now = now or timezone.now()
    try:
        previous = livestore.swap_intake(now.timestamp())
        _note_resumed(now.timestamp(), previous)
    except RedisError:
        log.warning("could not note a heartbeat's arrival", exc_info=True)


def _note_resumed(ts: float, previous: float | None) -> None:
    """No heartbeat from any node for half the offline window is the control plane's outage (web down, a
    network cut on our side): when heartbeats come back, remember when. An emptied Redis knows no previous
    heartbeat: the database (a flush behind) says when the last one was, and this Redis's clock starts."""
    if previous is None:
        livestore.note_born(ts)
        last = Node.objects.aggregate(last=Max("last_heartbeat_at"))["last"]
        if last is None:
            return
        previous = last.timestamp()
    if ts - previous <= settings.EULER_NODE_OFFLINE_AFTER / 2:
        return
    ttl = int(4 * settings.EULER_NODE_OFFLINE_AFTER) + 60
    try:
        livestore.set_resumed(ts, previous, ttl)
    except RedisError:
        log.warning("could not note that heartbeats resumed", exc_info=True)


# --- the batch flush of last-seen times ----------------------------------------------------------------
FLUSH_OVERLAP = 5.0  # seconds re-read each flush: web processes' clocks and late writes


def flush_seen() -> int:
    """Write the last-seen times that arrived since the previous flush to the node rows, in a few statements
    (one per 5,000 nodes). Returns how many rows it offered."""
    try:
        since = livestore.flushed()
        rows = livestore.seen_since(since - FLUSH_OVERLAP if since else 0.0)
    except RedisError:
        log.warning("last-seen flush: Redis did not answer")
        return 0
    if rows:
        if not write_last_seen(rows):
            return 0
        try:
            livestore.set_flushed(max(ts for _, ts in rows))
            livestore.forget_before(time.time() - max(3600.0, 10 * settings.EULER_NODE_HEARTBEAT_MAX_INTERVAL))
        except RedisError:
            pass
    return len(rows)


FLUSH_LOCK = 0x6E6F6465  # advisory lock id: one flush at a time (two big UPDATEs could lock rows in crossed order)


def write_last_seen(rows: list[tuple[int, float]]) -> bool:
    """`last_heartbeat_at` for many nodes at once; never moves a row's time backwards. False when another
    flush held the lock (nothing written)."""
    table = Node._meta.db_table
    rows = sorted(rows)
    for i in range(0, len(rows), 5000):
        chunk = rows[i : i + 5000]
        if connection.vendor == "postgresql":
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [FLUSH_LOCK])
                if not cursor.fetchone()[0]:
                    return False  # another flush is writing: ours is offered again next time
                values = ",".join(["(%s::bigint, %s::timestamptz)"] * len(chunk))
                params = [x for pk, ts in chunk for x in (pk, datetime.fromtimestamp(ts, tz=UTC))]
                cursor.execute(
                    f'UPDATE "{table}" AS n SET last_heartbeat_at = v.ts FROM (VALUES {values}) AS v(id, ts) '  # noqa: S608 - table from the model, values bound
                    "WHERE n.id = v.id AND (n.last_heartbeat_at IS NULL OR n.last_heartbeat_at < v.ts)",
                    params,
                )
        else:
            objs = [Node(pk=pk, last_heartbeat_at=datetime.fromtimestamp(ts, tz=UTC)) for pk, ts in chunk]
            Node.objects.bulk_update(objs, ["last_heartbeat_at"], batch_size=500)
    return True


def live_last_seen(nodes) -> list:
    """Set each node's `last_heartbeat_at` to the live time from Redis when newer (API, console, admin)."""
    nodes = list(nodes)
    try:
        seen = livestore.seen_many([n.pk for n in nodes])
    except RedisError:
        return nodes
    for node in nodes:
        ts = seen.get(node.pk)
        if ts is not None:
            live = datetime.fromtimestamp(ts, tz=UTC)
            if node.last_heartbeat_at is None or live > node.last_heartbeat_at:
                node.last_heartbeat_at = live
    return nodes


# Offline detection lives beside the hot path; imported here so that `liveness.mark_offline` keeps working.
from nodes.offline import mark_offline  # noqa: E402, F401
