"""Node liveness in Redis: last-seen times, what each node last reported, the web processes' heartbeat budgets.

Keys, under `euler:live:<database name>:` (two deployments or test runs on one Redis never mix):
- `seen`      sorted set: node id → last heartbeat (Unix time). The live truth; `last_heartbeat_at` in the
              node row trails it by at most EULER_NODE_SEEN_FLUSH_EVERY (flushed in batches).
- `n:<id>`    hash: `v` (generation: changes when the node row changes, so that processes drop their cached
              copy), `fp` (fingerprint of the stored fields), `rfp`/`hk` (listed attempts, last hook run),
              `iv` (interval last handed out), `u` (reported usage: live GPU figures).
- `intake`    the newest heartbeat from any node; a heartbeat that finds it old notes `resumed` in the same
              script (queue_swap_intake); one that finds it missing, from the database.
- `born`      when this Redis began holding liveness: an emptied Redis knows nobody, and that is a gap.
- `webs`      sorted set of `<process>|<budget>` by expiry: the live web processes.
- `flushed`   the newest last-seen time already written to the database.
- `webload`   hash: process → `<at>,<event-loop lag>,<heartbeats/s>` (offline detection's overload guard).
- `hold:<id>`  set of attempt ids a stopping agent left running for its next start (POST leaving), expiring
              after EULER_NODE_RESTART_HOLD: the offline path does not lose them while it lives.
- `inval`     a pub/sub channel: `<origin>|<id>,<id>…`, node rows that changed (web processes drop their
              cached copies; `origin`, when set, is the process that wrote the change and keeps its copy).
"""

from __future__ import annotations

import json
import math
import os
import socket
import time
import uuid

from django.conf import settings
from django.db import connections

from euler import redis as euler_redis

PROCESS_ID = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


def ns() -> str:
    return f"euler:live:{connections['default'].settings_dict['NAME']}:"


def node_key(node_id: int) -> str:
    return f"{ns()}n:{node_id}"


def _text(value) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


text = _text


def decode_hash(raw: dict) -> dict[str, str]:
    return {_text(k): _text(v) for k, v in (raw or {}).items()}


def as_float(value) -> float | None:
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


# --- the heartbeat's round trip (sync and asyncio pipelines take the same commands) ---------------------
def queue_beat(pipe, *, node_id: int, ts: float, interval: float, usage: str, intake: bool = True) -> None:
    """Results, in order: the previous intake time (unless `intake` is false: the caller swapped it already), the
    node's hash before this beat, ZADD, HSET. `usage`: the reported usage as JSON (quickbeat.usage_json)."""
    space = ns()
    key = f"{space}n:{node_id}"
    if intake:
        queue_swap_intake(pipe, ts)  # first: see queue_swap_intake
    pipe.hgetall(key)
    pipe.zadd(f"{space}seen", {str(node_id): ts})
    pipe.hset(key, mapping={"iv": interval, "u": usage})


def queue_batch(pipe, batch: dict[int, tuple[float, float | None, str | None]]) -> None:
    """Many heartbeats' writes at once (quickbeat.py): node id -> (seen, interval or None, usage JSON or None)."""
    space = ns()
    pipe.zadd(f"{space}seen", {str(node_id): seen for node_id, (seen, _, _) in batch.items()})
    for node_id, (_, interval, usage) in batch.items():
        mapping = {}
        if interval is not None:
            mapping["iv"] = interval
        if usage is not None:
            mapping["u"] = usage
        if mapping:
            pipe.hset(f"{space}n:{node_id}", mapping=mapping)
    pipe.set(f"{space}intake", max(seen for seen, _, _ in batch.values()))


def inval_channel() -> str:
    return f"{ns()}inval"


def queue_invalidate(pipe, node_ids, origin: str = "") -> None:
    ids = [str(i) for i in node_ids]
    for i in range(0, len(ids), 1000):
        pipe.publish(inval_channel(), f"{origin}|{','.join(ids[i : i + 1000])}")


def parse_invalidation(data, own: str = PROCESS_ID) -> list[int]:
    """The node ids a message on `inval` names, less those this process wrote itself."""
    origin, _, ids = (_text(data) or "").partition("|")
    if origin and origin == own:
        return []
    found = []
    for part in ids.split(","):
        try:
            found.append(int(part))
        except ValueError:
            continue
    return found


def invalidate(node_ids, *, origin: str = "") -> None:
    pipe = client().pipeline(transaction=False)
    queue_invalidate(pipe, node_ids, origin)
    pipe.execute()


def queue_registration(pipe, *, budget: float, now: float, ttl: float) -> None:
    """Results, in order: ZREMRANGEBYSCORE, ZADD, the live members, the number of nodes known."""
    space = ns()
    pipe.zremrangebyscore(f"{space}webs", "-inf", now)
    pipe.zadd(f"{space}webs", {f"{PROCESS_ID}|{budget:g}": now + ttl})
    pipe.zrange(f"{space}webs", 0, -1)
    pipe.zcard(f"{space}seen")


def queue_hooks_ran(pipe, *, node_id: int, running_fp: str, at: float) -> None:
    pipe.hset(node_key(node_id), mapping={"rfp": running_fp, "hk": at})


# --- sync helpers (the full path, the worker, the API) ---------------------------------------------------
def client():
    return euler_redis.client()


def generation(node_id: int) -> str | None:
    return _text(client().hget(node_key(node_id), "v"))


def claim_generation(node_id: int) -> str | None:
    """A generation for a node that has none (Redis emptied, first heartbeat): ours if nobody set one since."""
    token = uuid.uuid4().hex[:12]
    return token if client().hsetnx(node_key(node_id), "v", token) else None


def bump(*node_ids: int) -> None:
    """The node rows changed (approval, draining, credential, online): every process re-reads them."""
    if not node_ids:
        return
    pipe = client().pipeline(transaction=False)
    for node_id in node_ids:
        pipe.hset(node_key(node_id), "v", uuid.uuid4().hex[:12])
    queue_invalidate(pipe, node_ids)
    pipe.execute()


def bump_quietly(*node_ids: int) -> None:
    """`bump`, logging rather than raising when Redis does not answer (the caches then age out)."""
    import logging

    from redis.exceptions import RedisError

    try:
        bump(*node_ids)
    except RedisError:
        logging.getLogger(__name__).warning("could not tell web processes that nodes %s changed", node_ids)


def hold_attempts(node_id: int, attempt_ids: list[int], seconds: float) -> None:
    """Attempts of a stopping agent held from loss for `seconds` (a later notice replaces an earlier one)."""
    key = f"{ns()}hold:{node_id}"
    pipe = client().pipeline()
    pipe.delete(key)
    if attempt_ids and seconds > 0:
        pipe.sadd(key, *attempt_ids)
        pipe.expire(key, max(1, math.ceil(seconds)))
    pipe.execute()


def held_attempts(node_id: int) -> set[int]:
    return {int(a) for a in client().smembers(f"{ns()}hold:{node_id}")}


def seen_many(node_ids: list[int]) -> dict[int, float]:
    """Last-seen Unix times from Redis (nodes it does not know are left out)."""
    if not node_ids:
        return {}
    scores = client().zmscore(f"{ns()}seen", [str(i) for i in node_ids])
    return {i: s for i, s in zip(node_ids, scores, strict=True) if s is not None}


def intervals_many(node_ids: list[int]) -> dict[int, float]:
    pipe = client().pipeline(transaction=False)
    for node_id in node_ids:
        pipe.hget(node_key(node_id), "iv")
    return {i: v for i, v in zip(node_ids, (as_float(x) for x in pipe.execute()), strict=True) if v is not None}


def usage_many(node_ids: list[int]) -> dict[int, dict]:
    pipe = client().pipeline(transaction=False)
    for node_id in node_ids:
        pipe.hget(node_key(node_id), "u")
    found = {}
    for node_id, raw in zip(node_ids, pipe.execute(), strict=True):
        if raw:
            try:
                found[node_id] = json.loads(raw)
            except ValueError:
                continue
    return found


def born(now: float) -> float:
    """When this Redis began holding liveness; starts the clock now if it had not (an emptied Redis)."""
    key = f"{ns()}born"
    pipe = client().pipeline(transaction=False)  # one round trip (SET NX GET needs Redis 7)
    pipe.set(key, now, nx=True)
    pipe.get(key)
    return as_float(pipe.execute()[1]) or now


def note_born(now: float) -> None:
    client().set(f"{ns()}born", now, nx=True)


# The intake swap and the outage stamp in one step, queued before the beat's own last-seen time: a heartbeat that
# ends a quiet spell writes `resumed` in the same script that makes it the newest heartbeat, so no offline pass
# can see this node back and the others still silent without also seeing when heartbeats resumed (it would mark
# them offline the instant the first host returned). An intake Redis never held (emptied) leaves `resumed`
# pending: the time before the gap is in the database (lastseen.note_resumed settles it, at once), and an offline
# pass waits for it rather than judge without (a process that died before settling it: it expires).
_SWAP_INTAKE = """
local previous = redis.call('GET', KEYS[1])
redis.call('SET', KEYS[1], ARGV[1])
local before = previous and tonumber(previous)
if before then
  if tonumber(ARGV[1]) - before > tonumber(ARGV[2]) then
    redis.call('SET', KEYS[2], ARGV[1] .. ',' .. previous, 'EX', ARGV[3])
  end
else
  redis.call('SET', KEYS[2], 'pending', 'NX', 'EX', ARGV[4])
end
return previous
"""
_SETTLE = """
if redis.call('GET', KEYS[1]) == 'pending' then
  if ARGV[1] == '' then redis.call('DEL', KEYS[1]) else redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2]) end
end
"""
PENDING_FOR = 10  # seconds an unsettled `resumed` holds offline passes back


def gap_terms() -> tuple[float, int]:
    """(the silence from every node that is a control-plane gap, how long `resumed` is kept), in seconds."""
    window = settings.EULER_NODE_OFFLINE_AFTER
    return window / 2, int(4 * window) + 60


def queue_swap_intake(pipe, ts: float) -> None:
    """Its result: the previous intake time (None when Redis held none, and `resumed` is then pending)."""
    space = ns()
    gap, ttl = gap_terms()
    pipe.eval(_SWAP_INTAKE, 2, f"{space}intake", f"{space}resumed", repr(float(ts)), repr(float(gap)), ttl, PENDING_FOR)


def swap_intake(ts: float) -> float | None:
    pipe = client().pipeline(transaction=False)
    queue_swap_intake(pipe, ts)
    return as_float(pipe.execute()[0])


def settle_resumed(resumed: float | None, before: float = 0.0) -> None:
    """A pending `resumed` becomes the gap found in the database (`resumed` given), or nothing (None)."""
    _, ttl = gap_terms()
    value = f"{resumed!r},{before!r}" if resumed is not None else ""
    client().eval(_SETTLE, 1, f"{ns()}resumed", value, ttl)


class Pending(Exception):
    """Heartbeats came back into an emptied Redis and the time before the gap is being looked up."""


def resumed() -> tuple[float, float]:
    """(when heartbeats resumed after a control-plane gap, the newest heartbeat before it), zeros when none;
    raises Pending while the first heartbeat into an emptied Redis settles it."""
    raw = _text(client().get(f"{ns()}resumed"))
    if not raw:
        return 0.0, 0.0
    if raw == "pending":
        raise Pending()
    a, b = raw.split(",")
    return float(a), float(b)


def seen_since(since: float) -> list[tuple[int, float]]:
    rows = client().zrangebyscore(f"{ns()}seen", f"({since!r}", "+inf", withscores=True)
    return [(int(member), score) for member, score in rows]


def flushed() -> float:
    return as_float(client().get(f"{ns()}flushed")) or 0.0


def set_flushed(ts: float) -> None:
    client().set(f"{ns()}flushed", ts)


def forget_before(ts: float) -> int:
    """Drop last-seen entries older than `ts` (deleted or long-gone nodes stop counting toward the interval)."""
    return client().zremrangebyscore(f"{ns()}seen", "-inf", f"({ts!r}")


def forget_node(node_id: int) -> None:
    pipe = client().pipeline(transaction=False)
    pipe.zrem(f"{ns()}seen", str(node_id))
    pipe.delete(node_key(node_id))
    pipe.execute()


def registration(budget: float, ttl: float, load: tuple[float, float] | None = None) -> tuple[list[str], int]:
    """Register this process (and its load: event-loop lag, heartbeats/s); the live members, the nodes known."""
    now = time.time()
    pipe = client().pipeline(transaction=False)
    queue_registration(pipe, budget=budget, now=now, ttl=ttl)
    if load is not None:
        lag, rate = load
        pipe.hset(f"{ns()}webload", PROCESS_ID, f"{now!r},{lag!r},{rate!r}")
    _, _, members, count = pipe.execute()[:4]
    return [_text(m) for m in members], int(count)


def web_processes(now: float) -> int:
    """How many web processes are registered and live (each registers with its budget; see queue_registration)."""
    members = client().zrangebyscore(f"{ns()}webs", f"({now!r}", "+inf")
    return len({_text(m).rpartition("|")[0] for m in members})


def web_loads(now: float, ttl: float) -> list[tuple[float, float]]:
    """(lag, heartbeats/s) of the web processes that reported within `ttl`; older reports are dropped."""
    key = f"{ns()}webload"
    live, stale = [], []
    for proc, raw in client().hgetall(key).items():
        try:
            at, lag, rate = (float(x) for x in _text(raw).split(","))
        except ValueError:
            stale.append(proc)
            continue
        if at < now - ttl:
            stale.append(proc)
        else:
            live.append((lag, rate))
    if stale:
        client().hdel(key, *stale)
    return live


def reset() -> None:
    """Delete every liveness key of this database (tests)."""
    r = client()
    keys = list(r.scan_iter(match=f"{ns()}*", count=1000))
    for i in range(0, len(keys), 500):
        r.delete(*keys[i : i + 500])
