"""My machines: what the signed-in user lent, what runs there, what each contributed, and its terms."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from console.views.common import error_message
from euler.errors import EulerError


@login_required
def my_machines(request):
    from lending.machines import machines

    rows = machines(request.user, now=timezone.now())
    for m in rows:
        m["cpu_points"] = [(d["day"][5:], d["cpu_hours"]) for d in m["daily"]]
        m["gpu_line"] = [d["gpu_hours"] for d in m["daily"]]
        m["terms_form"] = terms_form_values(m["terms"])
    context = {
        "machines": rows,
        "terms_error": request.session.pop("terms_error", None),
        "reclaim_error": request.session.pop("reclaim_error", None),
    }
    return render(request, "console/lending.html", context)


@login_required
@require_POST
def machine_terms(request, name: str):
    from lending.machines import lent_node
    from lending.terms import terms_set

    node = lent_node(request.user, name)
    if node is None:
        raise Http404("No such node among the machines you lent.")
    try:
        terms_set(node=node, data=terms_from_form(request.POST), by=request.user)
    except EulerError as exc:
        request.session["terms_error"] = {"node": name, "message": error_message(exc)}
    except ValueError as exc:
        request.session["terms_error"] = {"node": name, "message": str(exc)}
    return redirect("my-machines")


@login_required
@require_POST
def machine_reclaim(request, name: str):
    """The Reclaim and Resume buttons: the same service as POST /api/v1/nodes/{id}/reclaim (nodes/reclaim.py)."""
    from lending.machines import lent_node
    from nodes import reclaim

    node = lent_node(request.user, name)
    if node is None:
        raise Http404("No such node among the machines you lent.")
    authority = reclaim.OPERATOR if request.user.is_staff else reclaim.LENDER
    try:
        if request.POST.get("action") == "resume":
            reclaim.node_resume(node=node, authority=authority, by=request.user)
        else:
            raw = request.POST.get("grace", "").strip()
            try:
                grace = int(raw) if raw else None
            except ValueError:
                raise ValueError(_("The grace is a whole number of seconds.")) from None
            reclaim.node_reclaim(node=node, authority=authority, grace=grace, by=request.user)
    except EulerError as exc:
        request.session["reclaim_error"] = {"node": name, "message": error_message(exc)}
    except ValueError as exc:
        request.session["reclaim_error"] = {"node": name, "message": str(exc)}
    return redirect("my-machines")


def terms_form_values(terms: dict | None) -> dict:
    """The form's text fields for stored terms: windows one per line, "weekdays 20:00-08:00"."""
    terms = terms or {}
    lines = [f"{','.join(w['days'])} {w['start']}-{w['end']}" for w in terms.get("windows") or []]
    return {
        "timezone": terms.get("timezone") or "UTC",
        "windows": "\n".join(lines),
        "max_cpu_milli": terms.get("max_cpu_milli") or "",
        "max_memory_bytes": terms.get("max_memory_bytes") or "",
        "max_gpus": "" if terms.get("max_gpus") is None else terms["max_gpus"],
        "max_disk_bytes": terms.get("max_disk_bytes") or "",
        "allowed_projects": ", ".join(terms.get("allowed_projects") or []),
        "max_job_hours": terms.get("max_job_hours") or "",
    }


def terms_from_form(post) -> dict:
    """The API's terms from the form's text fields (the service validates them)."""
    data: dict = {"timezone": post.get("timezone", "").strip() or "UTC", "windows": []}
    for line in post.get("windows", "").splitlines():
        if not line.strip():
            continue
        days, _sep, span = line.strip().rpartition(" ")
        start, _dash, end = span.partition("-")
        if not days or not _dash:
            raise ValueError(_("Write each window as: weekdays 20:00-08:00"))
        data["windows"].append(
            {"days": [d.strip() for d in days.split(",") if d.strip()], "start": start.strip(), "end": end.strip()}
        )
    for cap in ("max_cpu_milli", "max_memory_bytes", "max_gpus", "max_disk_bytes"):
        value = post.get(cap, "").strip()
        if value:
            try:
                data[cap] = int(value)
            except ValueError:
                raise ValueError(_("Caps are whole numbers.")) from None
    projects = [p.strip() for p in post.get("allowed_projects", "").split(",") if p.strip()]
    if projects:
        data["allowed_projects"] = projects
    hours = post.get("max_job_hours", "").strip()
    if hours:
        try:
            data["max_job_hours"] = float(hours)
        except ValueError:
            raise ValueError(_("The longest job is a number of hours.")) from None
    return data
