"""Last-seen times: Redis holds them (the hot path writes there), the node rows trail by a batch flush, readers
take the newer of the two; and the control plane's own gaps (no heartbeat from anyone for a while)."""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Max
from django.utils import timezone
from redis.exceptions import RedisError

from nodes import livestore
from nodes.models import Node

log = logging.getLogger(__name__)


# --- control-plane gaps -----------------------------------------------------------------------------
def note_intake(now=None) -> None:
    """Record a heartbeat's arrival (the fast path does this inside its round trip)."""
    now = now or timezone.now()
    try:
        previous = livestore.swap_intake(now.timestamp())
        note_resumed(now.timestamp(), previous)
    except RedisError:
        log.warning("could not note a heartbeat's arrival", exc_info=True)


def note_resumed(ts: float, previous: float | None, *, node_id: int | None = None) -> None:
    """No heartbeat from any node for half the offline window is the control plane's outage (web down, a
    network cut on our side): when heartbeats come back, remember when. Redis's intake swap stamps that itself
    when it held a previous heartbeat (livestore.queue_swap_intake). An emptied Redis knows none (the swap left
    `resumed` pending): the database (a flush behind) says when the last one was, and this Redis's clock
    starts. The node whose heartbeat this is may have written its row already (a full heartbeat writes before
    it notes): its own new time is no evidence of the time before the outage, so its row is left out."""
    if previous is not None:
        return
    try:
        livestore.note_born(ts)
        rows = Node.objects.exclude(pk=node_id) if node_id is not None else Node.objects.all()
        last = rows.aggregate(last=Max("last_heartbeat_at"))["last"]
        gap, _ = livestore.gap_terms()
        if last is not None and ts - last.timestamp() > gap:
            livestore.settle_resumed(ts, last.timestamp())
        else:
            livestore.settle_resumed(None)
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
