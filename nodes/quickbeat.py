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
import logging
import time

from django.conf import settings
from django.db import connection
from redis.exceptions import RedisError

from nodes import beathooks, beatmemo, cadence, lastseen, livestore, memory, policy
from nodes.beatmemo import hooks_ran, noted_intake, usage_json, wrote  # noqa: F401 - known by this module
from nodes.memory import (  # noqa: F401 - the callers that know them by this module
    invalidate,
    may_remember,
    on,
    refresh_later,
    refresh_pending,
    serving_loop,
    subscribed,
    token,
    unsubscribed,
)

log = logging.getLogger(__name__)


# The quick heartbeats waiting for the next batch: (node id, seen, interval to write or None, usage or None).
# A deque, appended on the event loop and drained by the batch thread without a lock: a lock shared with
# threads stalls the event loop whenever its holder is descheduled between two bytecodes (the GIL's switch
# interval), which showed as a tenth of the loop's time under load.
_beats: collections.deque = collections.deque()

BATCH_EVERY = 0.1  # seconds between the batched Redis writes of one web process
FAIL_HOLD = 2.0  # seconds the quick path stays off after a batch could not reach Redis
IV_DRIFT = 0.25  # the interval a node was told is rewritten to Redis when it moved by this fraction
IV_REFRESH = 30.0  # ... or this many seconds after it was last written


# --- the quick heartbeat -----------------------------------------------------------------------------
def known_node(raw: str | None, loop):
    """The cached row of the node behind this credential when the cache is current (the poll's
    authentication without the database), else None."""
    if not on(loop):
        return None
    found = memory.known_for(raw)
    if found is None or found[1].node.approval == "rejected":
        return None
    return found[1].node


def known_id(node_id: int, loop):
    """The cached row of a node by its id when the cache is current, else None (a poll woken up re-reads it)."""
    if not on(loop):
        return None
    known = memory.known_by_id(node_id)
    return known.node if known is not None else None


def reply(node, interval: float) -> dict:
    """`protocol.HeartbeatReply(...).model_dump(mode="json")` with no commands, built directly."""
    return {
        "approval": node.approval,
        "draining": node.draining,
        "heartbeat_interval": interval,
        "commands": [],
        "poll_wait": cadence.poll_wait_for(interval),
        "gpu_resets": node.gpu_resets or {},
    }


def heartbeat(*, raw: str | None, body: bytes, parse, loop) -> dict | None:
    """The reply, from memory, when this heartbeat needs nothing else; None: take the verifying path."""
    if not on(loop):
        return None
    found = memory.known_for(raw)
    if found is None or not found[1].node.online:
        return None
    known = found[1]
    now = time.time()
    if now - beatmemo.last_intake() > settings.EULER_NODE_OFFLINE_AFTER / 2:
        return None  # the first heartbeat after a quiet spell checks for a control-plane gap
    node = known.node
    local = beatmemo.local(node.pk)
    if local is None or local.body != body:
        hb = parse()
        local = beatmemo.entry(node.pk)
        local.body = body
        local.fp = policy.change_fingerprint(policy.heartbeat_fields(hb, None))
        local.rfp = policy.running_fp(hb)
        local.usage = usage_json(policy.usage(hb))
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
    interval = cadence.interval_now()
    write_iv = None
    if abs(interval - local.iv_written) > IV_DRIFT * interval or now - local.iv_at > IV_REFRESH:
        write_iv, local.iv_written, local.iv_at = interval, interval, now
    write_usage = None
    if local.usage != local.usage_written:
        write_usage = local.usage_written = local.usage
    _beats.append((node.pk, now, write_iv, write_usage))  # no lock: see _beats
    beatmemo.noted_intake(now)
    _start_flusher()
    return reply(node, interval)


def hooks_later(node, body: bytes, rfp: str, now: float) -> None:
    """The periodic run of the hooks for a node answered from memory, on the heartbeat threads."""
    from nodes import asyncdb

    asyncdb.beat_pool().submit(asyncdb._in_pool, beathooks.hooks_in_background, copy.copy(node), body, rfp, now)


# --- the batch -------------------------------------------------------------------------------------------
def _start_flusher() -> None:
    memory.start_thread("beat-batch", _flush_forever)


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
    if cadence.registration_due():
        cadence.register_web()
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
        memory.fail(FAIL_HOLD)
        beatmemo.forget()
        lastseen.write_last_seen([(node_id, seen) for node_id, (seen, _, _) in batch.items()])
    return len(batch)


def reset() -> None:
    """Tests: forget everything this process learnt."""
    memory.reset()
    beatmemo.reset()
    _beats.clear()
