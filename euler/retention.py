"""Bounded data growth: beat removes what apps register here (jobs: old ended jobs with their attempts, events
and logs; nodes: node events; audit: audit events), each kind after its own number of days.

Each kind goes in batches of EULER_RETENTION_BATCH rows, one short transaction per batch, so a purge never
holds a long lock and a web request or a scheduling pass waits at most for one batch. A job is re-checked (jobs/retention.py)
under a row lock (SKIP LOCKED) in its batch, so one retried meanwhile is left alone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

log = logging.getLogger(__name__)


def cutoff(now: datetime, days: int) -> datetime | None:
    """Rows older than this go; None when retention is off (0 days)."""
    return now - timedelta(days=days) if days > 0 else None


def _purge_batch(queryset, batch: int, delete) -> tuple[int, bool]:
    with transaction.atomic():
        ids = list(queryset.order_by("created_at", "pk").values_list("pk", flat=True)[:batch])
        if ids:
            delete(ids)
    return len(ids), len(ids) == batch


def drain(step) -> int:
    """Run `step` (-> (rows done, more left)) until nothing is left; the rows done in all."""
    total, more = 0, True
    while more:
        done, more = step()
        total += done
    return total


@dataclass(frozen=True)
class Purge:
    kind: str  # the key in purge_expired's answer and its log line: "jobs", "node_events", "audit_events"
    days_setting: str  # the setting that says after how many days a row goes (0: kept)
    purge: Callable[..., int]  # purge(before=datetime, batch=int) -> rows removed


_PURGES: list[Purge] = []


def register(kind: str, *, days_setting: str, purge: Callable[..., int]) -> None:
    """An app's kind of rows that beat removes once older than `days_setting` days (from its AppConfig.ready)."""
    if not any(p.kind == kind for p in _PURGES):
        _PURGES.append(Purge(kind, days_setting, purge))


def purge_batches(queryset, batch: int, delete) -> int:
    """Remove the rows of `queryset` oldest first (created_at), `batch` at a time, each batch its own transaction."""
    return drain(lambda: _purge_batch(queryset, batch, delete))


def purge_expired(now: datetime | None = None) -> dict[str, int]:
    """One retention pass over every registered kind; returns how many rows of each went."""
    now = now or timezone.now()
    batch = settings.EULER_RETENTION_BATCH
    done = dict.fromkeys((p.kind for p in _PURGES), 0)
    for p in _PURGES:
        before = cutoff(now, getattr(settings, p.days_setting))
        if before is not None:
            done[p.kind] = p.purge(before=before, batch=batch)
    if any(done.values()):
        log.info("retention: removed %s", ", ".join(f"{n} {kind.replace('_', ' ')}" for kind, n in done.items()))
    return done
