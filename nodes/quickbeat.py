"""The common heartbeat without a round trip: answered on the event loop from memory, its Redis writes batched.

Under an ASGI server a web process subscribes to node-row invalidations (`livestore.invalidate`, published
whenever a node row changes: approval, draining, credential, offline, a written change) on the same Redis
connection as the poll wake-ups (channel.py). While that subscription holds, the process's cached copy of
a node row is known to be current, so a heartbeat from a node it knows, reporting what it reported last
time, with its hooks not due, is answered from memory: no Redis read, no database, no thread hop. Its
last-seen time, interval and usage join a per-process batch that one thread writes to Redis in one
pipeline every BATCH_EVERY seconds (offline detection works in windows of many seconds; a ~0.1 s lag is
nothing to it). Everything else (a node not cached, a changed report, hooks due, the first heartbeat after
a quiet spell, no subscription, a failed batch) takes the verifying path in liveness.py, as before.

Keeping the cache honest:
- the subscription's (re)start clears the cache: invalidations may have been missed while it was down;
- a row read before an invalidation is not cached after it (`token()` / `may_remember()`);
- a failed batch (Redis down) clears the cache, writes its last-seen times to the node rows instead, and
  keeps the quick path off for FAIL_HOLD seconds (heartbeats then take the write-through path).
"""

from __future__ import annotations

import collections
import copy
import json
import logging
import threading
import time
from dataclasses import dataclass

from django.conf import settings
from django.db import connection
from redis.exceptions import RedisError

from nodes import livestore, policy

log = logging.getLogger(__name__)

BATCH_EVERY = 0.1  # seconds between the batched Redis writes of one web process
FAIL_HOLD = 2.0  # seconds the quick path stays off after a batch could not reach Redis
IV_DRIFT = 0.25  # the interval a node was told is rewritten to Redis when it moved by this fraction
IV_REFRESH = 30.0  # ... or this many seconds after it was last written
_MAX_NODES = 100_000

_lock = threading.Lock()
_state: dict = {"loop": None, "seq": 0, "reset_seq": 0, "fail_until": 0.0, "intake": 0.0, "refresh_all": False}
_inval_at: dict[int, int] = {}  # node id -> the invalidation sequence number that last named it


@dataclass
class Local:
    """What this process knows of a node's recent heartbeats (beside the cached row in liveness._known)."""

    body: bytes = b""
    fp: str = ""  # change fingerprint of `body`
    rfp: str = ""  # running fingerprint of `body`
    usage: str = ""  # usage JSON of `body`
    hooks_rfp: str | None = None  # the running fingerprint when the hooks last ran
    hooks_at: float | None = None  # when they last ran (0: they asked for the next heartbeat)
    iv_written: float = 0.0
    iv_at: float = 0.0
    usage_written: str = ""


_local: dict[int, Local] = {}
_refresh: set[int] = set()  # node ids whose cached rows an invalidation dropped: to read again
WARM_SEEN = 3600.0  # when the subscription starts, the nodes seen this recently are read into the cache
_refresh_wake = threading.Event()
REFRESH_DELAY = 0.05  # seconds the refresher waits after a wake-up, to take a burst of invalidations at once
# The quick heartbeats waiting for the next batch: (node id, seen, interval to write or None, usage or None).
# A deque, appended on the event loop and drained by the batch thread without a lock: a lock shared with
# threads stalls the event loop whenever its holder is descheduled between two bytecodes (the GIL's switch
# interval), which showed as a tenth of the loop's time under load.
_beats: collections.deque = collections.deque()


# --- trust: the invalidation subscription -----------------------------------------------------------------
def subscribed(loop) -> None:
    """The invalidation subscription (re)started on `loop`: forget every cached row (invalidations may have
    been missed) and trust the cache from now on."""
    from nodes import liveness

    with _lock:
        _state["seq"] += 1
        _state["reset_seq"] = _state["seq"]
        _inval_at.clear()
        _state["loop"] = loop
    liveness.forget_all()


def unsubscribed(loop) -> None:
    with _lock:
        if _state["loop"] is loop:
            _state["loop"] = None


def invalidate(node_ids: list[int]) -> list[int]:
    """These node rows changed: drop their cached copies (and refuse copies read before now). Returns the ids
    that were cached."""
    from nodes import liveness

    with _lock:
        _state["seq"] += 1
        seq = _state["seq"]
        if len(_inval_at) + len(node_ids) > _MAX_NODES:
            _inval_at.clear()
            _state["reset_seq"] = seq
        for node_id in node_ids:
            _inval_at[node_id] = seq
    return liveness.forget_nodes(node_ids)


def refresh_later(node_ids=(), *, everyone: bool = False) -> None:
    """Have the refresher thread read these rows (or every node Redis has seen lately) into the cache: the
    subscription calls this with the cached rows an invalidation dropped, and with `everyone` when it starts."""
    with _lock:
        _refresh.update(node_ids)
        _state["refresh_all"] = _state["refresh_all"] or everyone
    _start_thread("refresher", _refresh_forever)
    _refresh_wake.set()


def refresh_pending() -> int:
    """One round of the refresher: the cached rows invalidations dropped since the last round (or, after the
    subscription (re)started, every node Redis has seen lately), read again in bulk."""
    from nodes import liveness

    with _lock:
        todo = set(_refresh)
        _refresh.clear()
        everyone, _state["refresh_all"] = _state["refresh_all"], False
    if everyone:
        try:
            todo.update(node_id for node_id, _ in livestore.seen_since(time.time() - WARM_SEEN))
        except RedisError:
            log.warning("could not list the nodes to cache: their next heartbeats take the full path")
    return liveness.refresh(todo) if todo else 0


def _refresh_forever() -> None:
    while True:
        _refresh_wake.wait()
        _refresh_wake.clear()
        time.sleep(REFRESH_DELAY)  # a bulk change publishes in bursts: one round for the burst
        try:
            refresh_pending()
        except Exception:  # noqa: BLE001 - the refresher must outlive any one failure
            log.exception("refreshing invalidated node rows failed")
        finally:
            if connection.connection is not None:
                connection.close()


def token() -> int:
    """Taken before a node row is read for caching; `may_remember` says whether it is still current."""
    return _state["seq"]


def may_remember(node_id: int, taken: int) -> bool:
    with _lock:
        return taken >= _state["reset_seq"] and _inval_at.get(node_id, -1) <= taken


def serving_loop():
    """The event loop whose subscription vouches for the cache (for code in a pool thread serving its request)."""
    return _state["loop"]


def on(loop) -> bool:
    return loop is not None and _state["loop"] is loop and time.monotonic() >= _state["fail_until"]


# --- what this process learns from the verifying path -------------------------------------------------
def _entry(node_id: int) -> Local:
    local = _local.get(node_id)
    if local is None:
        if len(_local) >= _MAX_NODES:
            _local.clear()
        local = _local[node_id] = Local()
    return local


def hooks_ran(node_id: int, rfp: str | None, at: float | None) -> None:
    local = _entry(node_id)
    local.hooks_rfp, local.hooks_at = rfp, at


def noted_intake(now: float) -> None:
    """A heartbeat reached Redis (the verifying path saw the intake time, and noted a gap if there was one)."""
    if now > _state["intake"]:
        _state["intake"] = now


def wrote(node_id: int, interval: float, usage: str, now: float) -> None:
    """The verifying path wrote this node's interval and usage to Redis."""
    local = _entry(node_id)
    local.iv_written, local.iv_at, local.usage_written = interval, now, usage


# --- the quick heartbeat -----------------------------------------------------------------------------
def known_node(raw: str | None, loop):
    """The cached row of the node behind this credential when the cache is current (the poll's
    authentication without the database), else None."""
    if not on(loop):
        return None
    from nodes import liveness

    found = liveness.known_for(raw)
    if found is None or found[1].node.approval == "rejected":
        return None
    return found[1].node


def known_id(node_id: int, loop):
    """The cached row of a node by its id when the cache is current, else None (a poll woken up re-reads it)."""
    if not on(loop):
        return None
    from nodes import liveness

    known = liveness.known_by_id(node_id)
    return known.node if known is not None else None


def usage_json(usage: dict) -> str:
    return json.dumps(usage, separators=(",", ":"))


def reply(node, interval: float) -> dict:
    """`protocol.HeartbeatReply(...).model_dump(mode="json")` with no commands, built directly."""
    from nodes.liveness import poll_wait_for

    return {
        "approval": node.approval,
        "draining": node.draining,
        "heartbeat_interval": interval,
        "commands": [],
        "poll_wait": poll_wait_for(interval),
    }


def heartbeat(*, raw: str | None, body: bytes, parse, loop) -> dict | None:
    """The reply, from memory, when this heartbeat needs nothing else; None: take the verifying path."""
    if not on(loop):
        return None
    from nodes import liveness

    found = liveness.known_for(raw)
    if found is None or not found[1].node.online:
        return None
    known = found[1]
    now = time.time()
    if now - _state["intake"] > settings.EULER_NODE_OFFLINE_AFTER / 2:
        return None  # the first heartbeat after a quiet spell checks for a control-plane gap
    node = known.node
    local = _local.get(node.pk)
    if local is None or local.body != body:
        hb = parse()
        local = _entry(node.pk)
        local.body = body
        local.fp = policy.change_fingerprint(liveness.heartbeat_fields(hb, None))
        local.rfp = liveness.running_fp(hb)
        local.usage = usage_json(liveness.usage(hb))
    if local.fp != known.fp or local.hooks_rfp != local.rfp or not local.hooks_at:
        # The verifying path must run (a write; the hooks, for a changed list of attempts or because they asked
        # to look again), on threads that a burst of jobs can keep busy: the node is alive whatever it finds,
        # so its last-seen time goes in this batch, not after the queue.
        _beats.append((node.pk, now, None, None))
        _start_flusher()
        return None
    if policy.hooks_due(running_changed=False, last_run=local.hooks_at, now=now, every=settings.EULER_NODE_HOOKS_EVERY):
        # Only the periodic look is due: answered now, the hooks run on a heartbeat thread meanwhile. What they
        # find (rare: a container of an attempt that is no longer current) makes them due again, and the
        # node's next heartbeat takes the verifying path and carries the commands.
        local.hooks_at = now  # once per period, however long the run waits for a thread
        hooks_later(node, local.body, local.rfp, now)
    interval = liveness.interval_now()
    write_iv = None
    if abs(interval - local.iv_written) > IV_DRIFT * interval or now - local.iv_at > IV_REFRESH:
        write_iv, local.iv_written, local.iv_at = interval, interval, now
    write_usage = None
    if local.usage != local.usage_written:
        write_usage = local.usage_written = local.usage
    _beats.append((node.pk, now, write_iv, write_usage))  # no lock: see _beats
    _state["intake"] = now
    _start_flusher()
    return reply(node, interval)


def hooks_later(node, body: bytes, rfp: str, now: float) -> None:
    """The periodic run of the hooks for a node answered from memory, on the heartbeat threads."""
    from nodes import liveness
    from nodes.node_api import asyncdb

    asyncdb.beat_pool().submit(asyncdb._in_pool, liveness.hooks_in_background, copy.copy(node), body, rfp, now)


# --- the batch -------------------------------------------------------------------------------------------
def _start_thread(name: str, target) -> None:
    thread = _threads.get(name)
    if thread is not None and thread.is_alive():
        return
    with _lock:
        thread = _threads.get(name)
        if thread is not None and thread.is_alive():
            return
        thread = _threads[name] = threading.Thread(target=target, name=f"node-{name}", daemon=True)
    thread.start()


_threads: dict[str, threading.Thread] = {}


def _start_flusher() -> None:
    _start_thread("beat-batch", _flush_forever)


def _flush_forever() -> None:
    while True:
        time.sleep(BATCH_EVERY)
        try:
            flush_batch()
        except Exception:  # noqa: BLE001 - the batch thread must outlive any one failure
            log.exception("heartbeat batch failed")
        finally:
            if connection.connection is not None:
                connection.close()  # a failed batch wrote to the database: hold no connection between batches


def flush_batch() -> int:
    """Write the batched heartbeats to Redis in one pipeline (and renew this process's registration when
    due). Redis down: their last-seen times go to the node rows instead, and the quick path stops."""
    from nodes import liveness

    if liveness.registration_due():
        liveness.register_web()
    batch: dict[int, tuple[float, float | None, str | None]] = {}  # node id -> (seen, interval, usage)
    while True:
        try:
            node_id, seen, iv, usage = _beats.popleft()
        except IndexError:
            break
        before = batch.get(node_id)
        if before is not None:  # two beats of one node in one batch: keep what either had to write
            iv = iv if iv is not None else before[1]
            usage = usage if usage is not None else before[2]
        batch[node_id] = (seen, iv, usage)
    if not batch:
        return 0
    try:
        pipe = livestore.client().pipeline(transaction=False)
        livestore.queue_batch(pipe, batch)
        pipe.execute()
    except RedisError:
        log.warning("heartbeat batch: Redis did not answer; %d last-seen times go to the node rows", len(batch))
        with _lock:
            _state["fail_until"] = time.monotonic() + FAIL_HOLD
        liveness.forget_all()
        _local.clear()
        liveness.write_last_seen([(node_id, seen) for node_id, (seen, _, _) in batch.items()])
    return len(batch)


def reset() -> None:
    """Tests: forget everything this process learnt."""
    with _lock:
        _state.update(loop=None, fail_until=0.0, intake=0.0)
        _state["seq"] += 1
        _state["reset_seq"] = _state["seq"]
        _inval_at.clear()
        _local.clear()
        _beats.clear()
        _refresh.clear()
        _state["refresh_all"] = False
