"""Invocation quota: one atomic Redis script per call counts and refuses; a beat task flushes to the ledger.

Keys: `euler:inv:used:{project}:{YYYYMM}` holds the period's count (seeded from the ledger when
missing, e.g. after a Redis restart); `euler:inv:pending:{project}` is a hash of not-yet-flushed
counts by `YYYY-MM-DD|agent`.
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, date, datetime

from asgiref.sync import sync_to_async
from django.db.models import Sum

from euler.redis import async_client, client
from quotas.ledger import ledger_add
from quotas.models import Quota, Resource, UsageEntry
from quotas.periods import period_bounds

_COUNT = """
local used = redis.call('GET', KEYS[1])
if not used then return -2 end
if tonumber(used) >= tonumber(ARGV[1]) then return -1 end
redis.call('INCR', KEYS[1])
redis.call('HINCRBY', KEYS[2], ARGV[2], 1)
return tonumber(used) + 1
"""

_LIMIT_TTL = 5.0
_limits: dict[int, tuple[float, int]] = {}


def _used_key(project_id: int, now: datetime) -> str:
    return f"euler:inv:used:{project_id}:{now:%Y%m}"


def _pending_key(project_id: int) -> str:
    return f"euler:inv:pending:{project_id}"


def _cached_limit(project_id: int) -> int | None:
    cached = _limits.get(project_id)
    return cached[1] if cached and cached[0] > time.monotonic() else None


def _limit(project_id: int) -> int:
    cached = _cached_limit(project_id)
    if cached is not None:
        return cached
    limit = Quota.objects.filter(project_id=project_id).values_list("invocations", flat=True).first() or 0
    _limits[project_id] = (time.monotonic() + _LIMIT_TTL, limit)
    return limit


def _ledger_used(project_id: int, now: datetime) -> int:
    start, end = period_bounds(now)
    total = UsageEntry.objects.filter(
        project_id=project_id, resource=Resource.INVOCATIONS, day__gte=start.date(), day__lt=end.date()
    ).aggregate(t=Sum("amount"))["t"]
    return int(total or 0)


def _pending(project_id: int, now: datetime) -> int:
    month = f"{now:%Y-%m}"
    values = client().hgetall(_pending_key(project_id))
    return sum(int(v) for k, v in values.items() if k.decode().startswith(month))


def _seed(project_id: int, now: datetime) -> None:
    _, end = period_bounds(now)
    seed = _ledger_used(project_id, now) + _pending(project_id, now)
    ttl = int((end - now).total_seconds()) + 7 * 86400
    client().set(_used_key(project_id, now), seed, nx=True, ex=ttl)


def _retry_after(now: datetime) -> int:
    _, end = period_bounds(now)
    return max(1, int((end - now).total_seconds()))


async def check_and_count(project_id: int, agent_name: str = "") -> tuple[bool, int | None]:
    """Count one invocation; (allowed, Retry-After seconds when refused). Exact under concurrency."""
    now = datetime.now(UTC)
    limit = _cached_limit(project_id)
    if limit is None:  # a database read (in a thread) only every few seconds per project, not per call
        limit = await sync_to_async(_limit)(project_id)
    r = async_client()
    keys = [_used_key(project_id, now), _pending_key(project_id)]
    field = f"{now:%Y-%m-%d}|{agent_name}"
    for _ in range(2):
        result = await r.eval(_COUNT, 2, *keys, limit, field)
        if result == -2:
            await sync_to_async(_seed)(project_id, now)
            continue
        if result == -1:
            return False, _retry_after(now)
        return True, None
    return False, _retry_after(now)


def flush() -> int:
    """Move pending counts into the ledger; returns how many invocations were flushed."""
    r = client()
    total = 0
    for key in r.scan_iter(match="euler:inv:pending:*", count=500):
        project_id = int(key.decode().rsplit(":", 1)[1])
        claimed = f"euler:inv:flushing:{project_id}:{uuid.uuid4().hex}"
        try:
            r.rename(key, claimed)
        except Exception:  # noqa: BLE001 - the key vanished: another flusher took it
            continue
        for field, value in r.hgetall(claimed).items():
            day_s, _, agent = field.decode().partition("|")
            ledger_add(
                project_id=project_id,
                resource=Resource.INVOCATIONS,
                amount=int(value),
                day=date.fromisoformat(day_s),
                agent_name=agent,
            )
            total += int(value)
        r.delete(claimed)
    return total


def forget_limit(project_id: int) -> None:
    _limits.pop(project_id, None)
