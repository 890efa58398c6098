"""A lender's terms for one machine: validated here, stored on the node (`Node.lender_terms`), applied by the
scheduler (jobs/scheduling/terms.py for the windows and caps, jobs/scheduling/filters.py for the filters)."""

from __future__ import annotations

from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from euler.errors import InvalidInput
from jobs.scheduling.terms import DAYS, parse_hhmm

SHORTHANDS = {"weekdays": DAYS[:5], "weekends": DAYS[5:], "daily": DAYS}
MAX_WINDOWS = 14
MAX_PROJECTS = 100
MAX_JOB_HOURS = 24 * 365
CAPS = ("max_cpu_milli", "max_memory_bytes", "max_gpus", "max_disk_bytes")
FIELDS = ("timezone", "windows", *CAPS, "allowed_projects", "max_job_hours")


def _bad(message: str, code: str = "invalid_terms") -> InvalidInput:
    return InvalidInput(message, code=code)


def _int(value, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _bad(f"{name} is a whole number, 0 or more.")
    return value


def approved_of(node) -> dict[str, int | None]:
    """The capacity the operator approved, per cap (None: not pinned, a node never approved)."""
    return {
        "max_cpu_milli": node.approved_cpu_milli,
        "max_memory_bytes": node.approved_memory_bytes,
        "max_gpus": len(node.gpus or []),
        "max_disk_bytes": node.approved_disk_bytes,
    }


def validate(data: dict, *, node, project_ids_by_name: dict[str, int]) -> dict:
    """The stored form of `data` (the whole terms: a field left out is no term), or 400 with a code."""
    if not isinstance(data, dict):
        raise _bad("Terms are a JSON object.")
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise _bad(f"Unknown field {unknown[0]!r}.", "unknown_field")
    zone = data.get("timezone") or "UTC"
    try:
        ZoneInfo(str(zone))
    except (ZoneInfoNotFoundError, ValueError):
        raise _bad(f"Unknown time zone {zone!r} (an IANA name such as Asia/Shanghai).", "invalid_timezone") from None
    windows = data.get("windows") or []
    if not isinstance(windows, list) or len(windows) > MAX_WINDOWS:
        raise _bad(f"windows is a list of at most {MAX_WINDOWS} windows.", "invalid_window")
    clean_windows = []
    for w in windows:
        if not isinstance(w, dict) or set(w) - {"days", "start", "end"} or not isinstance(w.get("days"), list):
            raise _bad('A window is {"days": ["mon", …], "start": "HH:MM", "end": "HH:MM"}.', "invalid_window")
        days: list[str] = []
        for d in w["days"]:
            d = str(d).lower()
            if d not in DAYS and d not in SHORTHANDS:
                raise _bad(f"Unknown day {d!r} (mon…sun, weekdays, weekends, daily).", "invalid_window")
            days.extend(x for x in SHORTHANDS.get(d, (d,)) if x not in days)
        try:
            parse_hhmm(w.get("start", "")), parse_hhmm(w.get("end", ""))
        except ValueError:
            raise _bad("A window's start and end are HH:MM (00:00–24:00).", "invalid_window") from None
        if not days:
            raise _bad("A window names at least one day.", "invalid_window")
        clean_windows.append({"days": [d for d in DAYS if d in days], "start": w["start"], "end": w["end"]})
    out: dict = {"timezone": str(zone), "windows": clean_windows}
    approved = approved_of(node)
    for cap in CAPS:
        value = _int(data.get(cap), cap)
        if value is not None and approved[cap] is not None and value > approved[cap]:
            raise _bad(
                f"{cap} {value} is above the approved capacity ({approved[cap]}): terms only lower it.",
                "cap_above_approved",
            )
        out[cap] = value
    names = data.get("allowed_projects") or []
    if not isinstance(names, list) or len(names) > MAX_PROJECTS or not all(isinstance(n, str) for n in names):
        raise _bad(f"allowed_projects is a list of at most {MAX_PROJECTS} project names.")
    missing = [n for n in names if n not in project_ids_by_name]
    if missing:
        raise _bad(f"No project named {missing[0]!r}.", "unknown_project")
    out["allowed_projects"] = sorted(set(names))
    out["allowed_project_ids"] = sorted({project_ids_by_name[n] for n in names})
    hours = data.get("max_job_hours")
    if hours is not None:
        if isinstance(hours, bool) or not isinstance(hours, int | float) or not 0 < hours <= MAX_JOB_HOURS:
            raise _bad(f"max_job_hours is more than 0 and at most {MAX_JOB_HOURS}.")
        hours = float(hours)
    out["max_job_hours"] = hours
    return out


def is_empty(terms: dict) -> bool:
    return not terms or (
        not terms.get("windows")
        and not terms.get("allowed_projects")
        and terms.get("max_job_hours") is None
        and all(terms.get(c) is None for c in CAPS)
    )


def terms_dict(node) -> dict | None:
    """What the API shows of a node's terms (None: none set)."""
    terms = node.lender_terms or {}
    if is_empty(terms):
        return None
    return {k: terms.get(k) for k in FIELDS}


def terms_set(*, node, data: dict, by, actor: str | None = None) -> dict:
    """Replace the node's terms (locked), record who changed what (`actor`, else the user `by`), and ask for a
    scheduling pass."""
    from django.db import transaction

    from audit.services import record
    from nodes.models import Node
    from nodes.signals import node_available, send_on_commit
    from quotas.models import Project

    names = data.get("allowed_projects") if isinstance(data, dict) else None
    wanted = [n for n in names[: MAX_PROJECTS + 1] if isinstance(n, str)] if isinstance(names, list) else []
    ids = dict(Project.objects.filter(name__in=wanted).values_list("name", "pk")) if wanted else {}
    with transaction.atomic():
        locked = Node.objects.select_for_update().get(pk=node.pk)
        clean = validate(data, node=locked, project_ids_by_name={str(k): v for k, v in ids.items()})
        if is_empty(clean):
            clean = {}
        before = locked.lender_terms or {}
        locked.lender_terms = clean
        locked.save(update_fields=["lender_terms"])
        shown = {k: v for k, v in clean.items() if k != "allowed_project_ids"}
        was = {k: v for k, v in before.items() if k != "allowed_project_ids"}
        record(
            "node.terms_changed",
            project=locked.owner_project_id,
            target=f"node:{locked.name}",
            details={"before": was, "after": shown},
            by=by,
            actor=actor,
        )
        send_on_commit(node_available, locked.pk)  # looser terms may place a waiting job
    return clean
