"""Reads of the ledger: totals per lender, node or project, per day or month, summed from the entries on read
(no roll-up table to drift from them)."""

from __future__ import annotations

from datetime import date

from django.db.models import BigIntegerField, Case, CharField, Count, F, Q, Sum, Value, When
from django.db.models.functions import TruncDay, TruncMonth

from lending.models import LedgerEntry

GROUPS = {
    "lender": ("lender_id", "lender_name"),
    "node": ("node_id", "node_name"),
    "project": ("project_id", "project_name"),
}
PERIODS = ("month", "day")
FIGURES = ("run_ms", "cpu_ms", "gpu_ms", "memory_gib_ms", "disk_gib_ms")
OTHER_PROJECTS = "(other projects)"


def month_range(month: str) -> tuple[date, date]:
    """[first day, first day of the next month) of "YYYY-MM"; ValueError when it is not one."""
    year, _, mon = month.partition("-")
    if len(year) != 4 or len(mon) != 2:
        raise ValueError(month)
    start = date(int(year), int(mon), 1)
    end = date(start.year + (start.month == 12), start.month % 12 + 1, 1)
    return start, end


def entries_for(*, user, staff: bool):
    """The entries a caller may total: staff every one, anyone else those of the machines they lent."""
    qs = LedgerEntry.objects.all()
    return qs if staff else qs.filter(lender_id=getattr(user, "pk", None) or -1)


def totals(qs, *, group_by: str, period: str = "month", month: str | None = None, named_projects=None) -> list[dict]:
    """One row per (group, period) with the exact integer sums of the entries' figures, all and credited only.

    `named_projects`: ids of the projects whose names the caller may see (None: all); the others are summed in
    one row without a name or id.
    """
    key, name = GROUPS[group_by]
    if month:
        start, end = month_range(month)
        qs = qs.filter(day__gte=start, day__lt=end)
    trunc = TruncMonth("day") if period == "month" else TruncDay("day")
    if group_by == "project" and named_projects is not None:
        visible = Q(project_id__in=list(named_projects))
        qs = qs.annotate(
            k=_case(visible, F("project_id"), None, BigIntegerField()),
            n=_case(visible, F("project_name"), OTHER_PROJECTS, CharField()),
        )
    else:
        qs = qs.annotate(k=F(key), n=F(name))
    sums = {f"all_{f}": Sum(f) for f in FIGURES}
    sums.update({f"credited_{f}": Sum(f, filter=Q(credited=True)) for f in FIGURES})
    rows = (
        qs.annotate(p=trunc)
        .values("k", "n", "p")
        .annotate(
            attempts=Count("id"),
            lost=Count("id", filter=Q(outcome="lost")),
            gpu_faults=Count("id", filter=Q(gpu_fault=True)),
            **sums,
        )
        .order_by("p", "n", "k")
    )
    out = []
    for row in rows:
        p = row["p"]
        item = {
            group_by: row["n"],
            f"{group_by}_id": row["k"],
            "period": p.strftime("%Y-%m") if period == "month" else p.strftime("%Y-%m-%d"),
            "attempts": row["attempts"],
            "lost": row["lost"],
            "gpu_faults": row["gpu_faults"],
        }
        for f in FIGURES:
            item[f] = row[f"all_{f}"] or 0
            item[f"credited_{f}"] = row[f"credited_{f}"] or 0
        out.append(item)
    return out


def _case(cond, then, default, field):
    return Case(When(cond, then=then), default=Value(default, output_field=field), output_field=field)
