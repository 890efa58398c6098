"""What this web process knows of nodes, and when it may trust it: the cached node rows (by credential lookup),
the invalidation sequence that keeps them honest, and the refresher that reads invalidated rows again in bulk. The hot paths (liveness, quickbeat) read it; the
invalidation subscription (channel) and saved rows (the post_save receiver here) keep it current."""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

from django.db import connection
from redis.exceptions import RedisError

from euler import tokens
from nodes import livestore
from nodes.auth import CREDENTIAL_PREFIX
from nodes.models import Approval, Node

log = logging.getLogger(__name__)

_lock = threading.Lock()
_MAX_NODES = 100_000
_state: dict = {"loop": None, "seq": 0, "reset_seq": 0, "fail_until": 0.0, "refresh_all": False}
_inval_at: dict[int, int] = {}  # node id -> the invalidation sequence number that last named it


_refresh: set[int] = set()  # node ids whose cached rows an invalidation dropped: to read again
WARM_SEEN = 3600.0  # when the subscription starts, the nodes seen this recently are read into the cache
_refresh_wake = threading.Event()
REFRESH_DELAY = 0.05  # seconds the refresher waits after a wake-up, to take a burst of invalidations at once


# --- the cached rows -----------------------------------------------------------------------------------
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


def remember(lookup: str, known: Known, taken: int | None = None) -> None:
    """Cache a node row; `taken` (token() before the row was read): not if it changed since."""
    with _known_lock:
        if taken is not None and not may_remember(known.node.pk, taken):
            return
        _known[lookup] = known
        _known.move_to_end(lookup)
        _lookup_of[known.node.pk] = lookup
        while len(_known) > _KNOWN_MAX:
            _, dropped = _known.popitem(last=False)
            _lookup_of.pop(dropped.node.pk, None)


def forget(lookup: str) -> None:
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
    taken = token()
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
            remember(node.credential_lookup, Known(node=node, gen=livestore.text(gen), fp=livestore.text(fp)), taken)
            kept += 1
    return kept


def cached_count() -> int:
    """How many node rows this process holds."""
    return len(_known)


def forget_all() -> None:
    with _known_lock:
        _known.clear()
        _lookup_of.clear()


_pk_of: dict[str, int] = {}  # credential lookup -> node id (never changes; a rotated credential has a new lookup)


def pk_of(lookup: str) -> int | None:
    """The node id a credential lookup was seen with (cheaper than reading the row to learn it)."""
    return _pk_of.get(lookup)


def note_pk(lookup: str | None, pk: int) -> None:
    if lookup:
        if len(_pk_of) >= _KNOWN_MAX:
            _pk_of.clear()
        _pk_of[lookup] = pk


# --- trust: the invalidation subscription -----------------------------------------------------------------
def subscribed(loop) -> None:
    """The invalidation subscription (re)started on `loop`: forget every cached row (invalidations may have
    been missed) and trust the cache from now on."""
    with _lock:
        _state["seq"] += 1
        _state["reset_seq"] = _state["seq"]
        _inval_at.clear()
        _state["loop"] = loop
    forget_all()


def unsubscribed(loop) -> None:
    with _lock:
        if _state["loop"] is loop:
            _state["loop"] = None


def invalidate(node_ids: list[int]) -> list[int]:
    """These node rows changed: drop their cached copies (and refuse copies read before now). Returns the ids
    that were cached."""
    with _lock:
        _state["seq"] += 1
        seq = _state["seq"]
        if len(_inval_at) + len(node_ids) > _MAX_NODES:
            _inval_at.clear()
            _state["reset_seq"] = seq
        for node_id in node_ids:
            _inval_at[node_id] = seq
    return forget_nodes(node_ids)


def queue_refresh(node_ids=(), *, everyone: bool = False) -> None:
    """Queue these rows (or every node Redis has seen lately) for the next `refresh_pending`."""
    with _lock:
        _refresh.update(node_ids)
        _state["refresh_all"] = _state["refresh_all"] or everyone


def refresh_later(node_ids=(), *, everyone: bool = False) -> None:
    """Have the refresher thread read these rows (or every node Redis has seen lately) into the cache: the
    subscription calls this with the cached rows an invalidation dropped, and with `everyone` when it starts."""
    queue_refresh(node_ids, everyone=everyone)
    start_thread("refresher", _refresh_forever)
    _refresh_wake.set()


def refresh_pending() -> int:
    """One round of the refresher: the cached rows invalidations dropped since the last round (or, after the
    subscription (re)started, every node Redis has seen lately), read again in bulk."""
    with _lock:
        todo = set(_refresh)
        _refresh.clear()
        everyone, _state["refresh_all"] = _state["refresh_all"], False
    if everyone:
        try:
            todo.update(node_id for node_id, _ in livestore.seen_since(time.time() - WARM_SEEN))
        except RedisError:
            log.warning("could not list the nodes to cache: their next heartbeats take the full path")
    return refresh(todo) if todo else 0


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
def fail(hold: float) -> None:
    """Redis did not take a batch: forget every cached row, keep the quick path off for `hold` seconds."""
    with _lock:
        _state["fail_until"] = time.monotonic() + hold
    forget_all()


def start_thread(name: str, target) -> None:
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


def reset() -> None:
    """Forget everything this process learnt (tests; a process that forks)."""
    forget_all()
    with _lock:
        _state.update(loop=None, fail_until=0.0)
        _state["seq"] += 1
        _state["reset_seq"] = _state["seq"]
        _inval_at.clear()
        _refresh.clear()
        _state["refresh_all"] = False


# --- saved rows ------------------------------------------------------------------------------------------
def node_row_changed(sender, instance, **kwargs) -> None:
    """A service saved a node (approval, trust, draining, credential): web processes drop their cached copy, now
    and again after the commit (a heartbeat between the two may have cached the row as it was)."""
    from django.db import transaction

    def changed() -> None:
        invalidate([instance.pk])  # this process at once (a rotated credential stops working here now)
        livestore.bump_quietly(instance.pk)

    changed()
    transaction.on_commit(changed)


def node_row_deleted(sender, instance, **kwargs) -> None:
    try:
        livestore.forget_node(instance.pk)
    except RedisError:
        pass  # its last-seen entry ages out
