"""Schedules (list, switch on/off, delete, runs) and webhooks (owners: register with the secret shown once,
delete, the delivery log with redeliver). The same service functions as the API."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db.models import Prefetch
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from console.views.common import error_message, no_store, project_page
from euler.errors import EulerError
from workflows import events, schedules, webhooks
from workflows.models import Delivery, DeliveryTry, Schedule


def _may_change(request, schedule: Schedule) -> bool:
    return request.is_owner or schedule.created_by_id == request.user.pk


@project_page
def schedule_list(request):
    rows = Schedule.objects.filter(project=request.project).select_related("created_by")
    for row in rows:
        row.may_change = _may_change(request, row)
    return render(request, "console/schedules.html", {"schedules": rows})


@project_page
def schedule_detail(request, name: str):
    try:
        schedule = schedules.get_schedule(project=request.project, name=name)
    except EulerError:
        from django.http import Http404

        raise Http404 from None
    context = {"schedule": schedule, "runs": schedule.runs.all()[:50], "may_change": _may_change(request, schedule)}
    return render(request, "console/schedule_detail.html", context)


def _schedule_for_change(request, name: str) -> Schedule:
    schedule = schedules.get_schedule(project=request.project, name=name)
    if not _may_change(request, schedule):
        raise PermissionDenied
    return schedule


@project_page
@require_POST
def schedule_switch(request, name: str):
    try:
        schedule = _schedule_for_change(request, name)
        enabled = request.POST.get("enabled") == "1"
        schedules.schedule_update(schedule=schedule, fields={"enabled": enabled}, by=request.user)
    except EulerError as exc:
        messages.error(request, error_message(exc))
    else:
        messages.success(request, (_("Schedule %(name)s enabled.") if enabled else _("Schedule %(name)s disabled."))
                         % {"name": name})  # fmt: skip
    return redirect("schedules")


@project_page
@require_POST
def schedule_delete(request, name: str):
    try:
        schedules.schedule_delete(schedule=_schedule_for_change(request, name), by=request.user)
    except EulerError as exc:
        messages.error(request, error_message(exc))
    else:
        messages.success(request, _("Schedule %(name)s deleted.") % {"name": name})
    return redirect("schedules")


def _owner(request) -> None:
    if not request.is_owner:
        raise PermissionDenied


def _hooks_page(request, **extra):
    context = {
        "hooks": request.project.webhooks.order_by("id"),
        "event_names": ["job.ended", "job.state_changed", *events.NAMES],
        **extra,
    }
    return no_store(render(request, "console/webhooks.html", context))


@project_page
def webhook_list(request):
    """Owners only. GET lists; POST registers a hook (its secret in this one response, never again)."""
    _owner(request)
    if request.method == "POST":
        try:
            hook, secret = webhooks.webhook_create(
                project=request.project,
                url=request.POST.get("url", "").strip(),
                event_names=request.POST.getlist("events"),
                description=request.POST.get("description", "")[:200],
                by=request.user,
            )
        except EulerError as exc:
            return _hooks_page(request, create_error=error_message(exc), values=request.POST)
        return _hooks_page(request, new_secret=secret, new_hook=hook)
    return _hooks_page(request)


def _hook(request, hook_id: int):
    _owner(request)
    try:
        return webhooks.get_hook(project=request.project, hook_id=hook_id)
    except EulerError:
        from django.http import Http404

        raise Http404 from None


@project_page
def webhook_detail(request, hook_id: int):
    hook = _hook(request, hook_id)
    tries = Prefetch("tries", queryset=DeliveryTry.objects.order_by("number"))
    deliveries = Delivery.objects.filter(hook=hook).prefetch_related(tries).order_by("-id")[:100]
    return render(request, "console/webhook_detail.html", {"hook": hook, "deliveries": deliveries})


@project_page
@require_POST
def webhook_delete(request, hook_id: int):
    hook = _hook(request, hook_id)
    webhooks.webhook_delete(hook=hook, by=request.user)
    messages.success(request, _("Webhook deleted."))
    return redirect("webhooks")


@project_page
@require_POST
def webhook_redeliver(request, hook_id: int, delivery_id: int):
    hook = _hook(request, hook_id)
    try:
        copy = webhooks.redeliver(delivery=webhooks.get_delivery(hook=hook, delivery_id=delivery_id), by=request.user)
    except EulerError as exc:
        messages.error(request, error_message(exc))
    else:
        messages.success(request, _("Delivery %(id)s queued.") % {"id": copy.pk})
    return redirect("webhook-detail", hook_id=hook.pk)
