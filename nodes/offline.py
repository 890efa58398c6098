"""Offline detection: nodes silent for their window go offline, judged by the live last-seen times in Redis.

Candidates come from the database (online rows whose `last_heartbeat_at`, a flush behind Redis, is older
than EULER_NODE_OFFLINE_AFTER: an index scan that finds only the silent and the not yet flushed); Redis then
says when each was really last seen and what interval it was told. Two guards keep a control-plane fault
from looking like a mass death: every online node silent at once (web down, a network cut on our side), and
an emptied Redis (restarted, flushed), which knows nobody: a node it has not heard from yet gets a whole
window from the moment this Redis started holding liveness. A third keeps a partly overloaded web tier from
starting a feedback loop (late heartbeats, nodes marked offline, their return taking the expensive path):
while the web processes report their event loops running late, every node gets more time
(`overload_allowance`).
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.utils import timezone
from redis.exceptions import RedisError

from nodes import cadence, livestore, policy, transitions
from nodes.models import Approval, Node

log = logging.getLogger(__name__)


def _control_plane_silence(silent: list[tuple], now) -> bool:
    """Every online node (two or more) went silent together: far likelier that heartbeats cannot reach us
    (web tier down, a network cut on our side) than that all machines died at once. Hold for up to
    EULER_NODE_SILENCE_HOLD seconds after the newest heartbeat rather than declaring every attempt lost."""
    online = Node.objects.filter(online=True).exclude(approval=Approval.REJECTED).count()
    if len(silent) < 2 or len(silent) != online:
        return False
    newest = max(last for _, _, last in silent)
    quiet = (now - newest).total_seconds()
    if quiet >= settings.EULER_NODE_OFFLINE_AFTER + settings.EULER_NODE_SILENCE_HOLD:
        return False
    log.warning(
        "all %d online nodes silent for %.0f s: heartbeats are probably not reaching the control plane; "
        "not marking them offline before %.0f s of silence",
        online,
        quiet,
        settings.EULER_NODE_OFFLINE_AFTER + settings.EULER_NODE_SILENCE_HOLD,
    )
    return True


def _after_outage(silent: list[tuple], now, resumed: float, before: float) -> list[tuple]:
    """Hosts reconnect one by one after a control-plane outage: a node silent when heartbeats came back gets a
    whole EULER_NODE_OFFLINE_AFTER from that moment, rather than being judged by its pre-outage heartbeat the
    instant another node returns (its attempts, often finished during the outage, would be lost and rerun)."""
    if not resumed or now.timestamp() >= resumed + settings.EULER_NODE_OFFLINE_AFTER:
        return silent
    # Held: nodes that were heartbeating until the outage began (not those already silent before it).
    since = before - settings.EULER_NODE_OFFLINE_AFTER / 2
    kept = [c for c in silent if not since <= c[2].timestamp() < resumed]
    if len(kept) < len(silent):
        log.info("%d silent nodes get until %.0f s after heartbeats resumed", len(silent) - len(kept),
                 settings.EULER_NODE_OFFLINE_AFTER)  # fmt: skip
    return kept


def _estimate_interval() -> float:
    """The interval a node is told now, for a node whose own one Redis no longer knows."""
    try:
        members = [m.decode() for m in livestore.client().zrange(f"{livestore.ns()}webs", 0, -1)]
    except RedisError:
        members = []
    count = Node.objects.filter(online=True).count()
    budget = policy.total_budget(members, own=settings.EULER_NODE_HEARTBEAT_BUDGET)
    return cadence.interval_for(count, budget, jitter=0)


def overload_allowance() -> float:
    """Extra silence allowed to every node while the web tier is behind (policy.overload_allowance), from the
    load the live web processes report."""
    try:
        loads = livestore.web_loads(time.time(), settings.EULER_NODE_WEB_TTL)
    except RedisError:
        return 0.0
    lag = max((lag for lag, _ in loads), default=0.0)
    if lag < policy.OVERLOAD_NOTICE:
        return 0.0
    online = Node.objects.filter(online=True).exclude(approval=Approval.REJECTED).count()
    interval = _estimate_interval()
    allowance = policy.overload_allowance(
        lag=lag,
        intake_rate=sum(rate for _, rate in loads),
        expected_rate=online / max(interval, 1e-3),
        cap=settings.EULER_NODE_SILENCE_HOLD,
    )
    log.warning(
        "web tier behind: event loop up to %.1f s late, taking %.0f heartbeats/s of the %.0f/s %d online nodes "
        "send; every node gets %.0f s more before it is offline",
        lag, sum(rate for _, rate in loads), online / max(interval, 1e-3), online, allowance,
    )  # fmt: skip
    return allowance


def silent_nodes(now) -> list[tuple[int, str, datetime]]:
    """(pk, name, last seen) of the online nodes past their window, before the control-plane guards."""
    floor = now - timedelta(seconds=settings.EULER_NODE_OFFLINE_AFTER)
    rows = list(
        Node.objects.filter(online=True, last_heartbeat_at__lt=floor)
        .exclude(approval=Approval.REJECTED)
        .values_list("pk", "name", "last_heartbeat_at")
    )
    if not rows:
        return []
    ids = [pk for pk, _, _ in rows]
    ts = now.timestamp()
    try:
        seen, intervals, born = livestore.seen_many(ids), livestore.intervals_many(ids), livestore.born(ts)
    except RedisError:
        seen, intervals, born = {}, {}, None  # judged by the database alone, as heartbeats then write it
    fallback = None
    allowance = None
    silent = []
    for pk, name, db_last in rows:
        last = max(db_last.timestamp(), seen.get(pk, 0.0))
        interval = intervals.get(pk)
        if interval is None:
            fallback = _estimate_interval() if fallback is None else fallback
            interval = fallback
        window = policy.offline_window(
            interval, offline_after=settings.EULER_NODE_OFFLINE_AFTER, missed=settings.EULER_NODE_OFFLINE_MISSED
        )
        if ts - last < window:
            continue
        if allowance is None:
            allowance = overload_allowance()
        if ts - last < window + allowance:
            continue  # the web tier is behind: its heartbeat may be waiting in a queue
        if pk not in seen and born is not None and last >= born - window and ts - born < window:
            continue  # alive when this Redis started empty: it gets a whole window to be heard from
        silent.append((pk, name, datetime.fromtimestamp(last, tz=UTC)))
    return silent


def _heard_since(node_id: int, last: datetime) -> bool:
    """A heartbeat newer than the one this pass judged by has reached Redis since (the node row, a flush behind,
    cannot say): the node is not silent. Looked up again right before the node goes offline, so that a heartbeat
    that raced the pass does not lose the attempts it just listed."""
    try:
        seen = livestore.seen_many([node_id]).get(node_id)
    except RedisError:
        return False
    # Compared as `silent_nodes` made `last`: Redis's float through the same datetime (microseconds), so the same
    # heartbeat is equal, never a hair newer, and any later one is newer.
    return seen is not None and datetime.fromtimestamp(seen, tz=UTC) > last


def mark_offline(*, now=None) -> list[int]:
    """Nodes silent for their window go offline, each once (a conditional UPDATE), with an event and the
    node_offline signal after commit (the jobs app marks their attempts lost)."""
    now = now or timezone.now()
    silent = silent_nodes(now)
    if silent and _control_plane_silence(silent, now):
        return []
    if silent:
        try:
            resumed, before = livestore.resumed()
        except livestore.Pending:
            log.info("heartbeats came back into an emptied Redis: the next pass judges silent nodes")
            return []
        except (RedisError, ValueError):
            resumed, before = 0.0, 0.0
        silent = _after_outage(silent, now, resumed, before)
    floor = now - timedelta(seconds=settings.EULER_NODE_OFFLINE_AFTER)
    gone = []
    for pk, name, last in silent:
        if _heard_since(pk, last):
            continue  # its heartbeat arrived while this pass looked (a restarted agent's first one, say)
        quiet = (now - last).total_seconds()
        if transitions.node_offline(node_id=pk, name=name, last=last, floor=floor, quiet=quiet):
            gone.append(pk)
    if gone:
        try:
            livestore.bump(*gone)  # its next heartbeat takes the full path and brings it back online
        except RedisError:
            log.warning("could not tell web processes that nodes went offline")
    return gone
