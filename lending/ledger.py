"""The lenders' ledger: each ended attempt's figures (pure), and the one writer that records them once.

Credit: work that ended normally (succeeded or failed by its own exit) or that Euler stopped (cancel, timeout,
budget, a window's end, a preemption by a higher class) is credited; work lost because the node vanished (or its GPU
failed under it) is not, nor work its lender took back (a reclaim: the job starts again elsewhere).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from euler import writes
from euler.prepared import Prepared

GIB = 1024**3
NOT_CREDITED = frozenset({"lost", "reclaimed"})  # attempt outcomes that earn no credit
GPU_FAULT_REASONS = frozenset({"gpu_error"})


@dataclass(frozen=True, slots=True)
class Figures:
    run_ms: int
    cpu_ms: int
    gpu_ms: int
    memory_gib_ms: int
    disk_gib_ms: int


def figures(
    *, started_at: datetime | None, ended_at: datetime, cpu_milli: int, memory_bytes: int, disk_bytes: int, gpus: int
) -> Figures:
    """What an attempt of this shape held from its start to its end, in integer resource-milliseconds (pure).
    An attempt that never started held nothing."""
    if started_at is None or ended_at <= started_at:
        return Figures(0, 0, 0, 0, 0)
    delta = ended_at - started_at
    run_ms = (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000
    return Figures(
        run_ms=run_ms,
        cpu_ms=cpu_milli * run_ms // 1000,
        gpu_ms=gpus * run_ms,
        memory_gib_ms=memory_bytes * run_ms // GIB,
        disk_gib_ms=max(0, disk_bytes) * run_ms // GIB,
    )


def credited(outcome: str) -> bool:
    return outcome not in NOT_CREDITED


ROW_FIELDS = (
    "id", "job_id", "node_id", "node_name", "state", "reason", "started_at", "ended_at", "cpu_milli", "memory_bytes",
    "disk_bytes", "gpu_uuids", "job__project_id", "job__project__name",
)  # fmt: skip


def _lenders_query(node_ids):
    from nodes.models import EnrollmentToken

    return (
        EnrollmentToken.objects.filter(node_id__in=node_ids, created_by__isnull=False)
        .order_by("created_at", "id")
        .values_list("node_id", "created_by_id", "created_by__username")
    )


def _row_query(attempt_id):
    from jobs.models import Attempt

    return Attempt.objects.filter(pk=attempt_id).values_list(*ROW_FIELDS)[:1]


_LENDERS = Prepared(_lenders_query)
_ROW = Prepared(_row_query)


def lenders_of(node_ids) -> dict[int, tuple[int, str]]:
    """Per node, its lender (id, username): who created the latest enrollment token it enrolled with."""
    found: dict[int, tuple[int, str]] = {}
    for node_id, user_id, username in _LENDERS(list(node_ids)):
        found[node_id] = (user_id, username)  # the latest wins
    return found


def entry_for(row: dict, lender: tuple[int, str] | None):
    """The unsaved entry of an ended attempt's row (ROW_FIELDS) and its lender."""
    from lending.models import LedgerEntry

    f = figures(
        started_at=row["started_at"],
        ended_at=row["ended_at"],
        cpu_milli=row["cpu_milli"],
        memory_bytes=row["memory_bytes"],
        disk_bytes=row["disk_bytes"],
        gpus=len(row["gpu_uuids"] or []),
    )
    lender_id, lender_name = lender or (None, "")
    return LedgerEntry(
        attempt_id=row["id"],
        attempt_ref=row["id"],
        job_ref=row["job_id"],
        project_id=row["job__project_id"],
        project_name=row["job__project__name"] or "",
        node_id=row["node_id"],
        node_name=row["node_name"],
        lender_id=lender_id,
        lender_name=lender_name,
        outcome=row["state"],
        reason=row["reason"],
        credited=credited(row["state"]),
        started_at=row["started_at"],
        ended_at=row["ended_at"],
        day=row["ended_at"].astimezone(UTC).date(),
        gpu_fault=row["reason"] in GPU_FAULT_REASONS,
        run_ms=f.run_ms,
        cpu_ms=f.cpu_ms,
        gpu_ms=f.gpu_ms,
        memory_gib_ms=f.memory_gib_ms,
        disk_gib_ms=f.disk_gib_ms,
    )


def record(*, attempt_id: int):
    """Write the ended attempt's entry and return it (without its id); a second call for the same attempt adds
    nothing and returns None (unique attempt_ref).

    Runs inside the transaction that ended the attempt (jobs.signals.attempt_ended), so the entry commits or rolls
    back with the ending itself: no ended attempt without its entry, no entry for an attempt still running.
    """
    from django.db import IntegrityError, transaction

    found = _ROW.first(attempt_id)
    row = dict(zip(ROW_FIELDS, found, strict=True)) if found else None
    if row is None or row["ended_at"] is None:
        return None
    lender = lenders_of([row["node_id"]]).get(row["node_id"]) if row["node_id"] is not None else None
    entry = entry_for(row, lender)
    try:
        with transaction.atomic():  # a savepoint: a duplicate leaves the caller's transaction usable
            writes.insert(entry)  # as save() writes it, its statement built once (the entry gets no id)
    except IntegrityError:
        return None  # already recorded
    return entry


def backfill(*, batch: int = 1000) -> int:
    """Record every ended attempt that has no entry yet (attempts that ended before the ledger existed), a batch
    per statement; returns how many it wrote. Running it again writes nothing: each attempt has one entry at most
    (an attempt recorded meanwhile by its ending is skipped by the unique attempt_ref)."""
    from django.db import transaction

    from jobs.models import Attempt
    from jobs.states import ATTEMPT_ENDED
    from lending.models import LedgerEntry

    written, after = 0, 0
    while True:
        rows = list(
            Attempt.objects.filter(pk__gt=after, state__in=ATTEMPT_ENDED, ended_at__isnull=False)
            .exclude(pk__in=LedgerEntry.objects.filter(attempt_ref__gt=after).values("attempt_ref"))
            .order_by("pk")
            .values(*ROW_FIELDS)[:batch]
        )
        if not rows:
            return written
        lenders = lenders_of({r["node_id"] for r in rows if r["node_id"] is not None})
        ids = [r["id"] for r in rows]
        with transaction.atomic():
            before = LedgerEntry.objects.filter(attempt_ref__in=ids).count()
            LedgerEntry.objects.bulk_create([entry_for(r, lenders.get(r["node_id"])) for r in rows],
                                            ignore_conflicts=True)  # fmt: skip
            written += LedgerEntry.objects.filter(attempt_ref__in=ids).count() - before
        after = ids[-1]
