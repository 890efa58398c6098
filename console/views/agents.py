"""Agents: register one (validated by the API's serializer), instances with health, per-agent charts."""

from datetime import timedelta

from django.http import Http404
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.translation import gettext as _

from console import sources
from console.agentcharts import buckets
from console.forms import field_for_code, lines, serializer_errors
from console.views.common import error_message, project_page
from euler.errors import EulerError
from quotas import scoped

WINDOWS = {"1h": (timedelta(minutes=5), 12), "24h": (timedelta(hours=1), 24), "7d": (timedelta(hours=6), 28)}
_SERVICE_FIELDS = {
    "invalid_name": "name",
    "name_taken": "name",
    "invalid_url": "base_urls",
    "forbidden_address": "base_urls",
    "too_many_instances": "base_urls",
    "invalid_header": "auth_header_name",
    "invalid_path": "health_path",
}


def _register(request):
    """Parse the form into the API's payload, validate with the API's serializer, call the API's service."""
    from agents import services
    from agents.api.serializers import AgentCreateIn

    post = request.POST
    payload = {
        "name": post.get("name", "").strip(),
        "description": post.get("description", ""),
        "health_path": post.get("health_path", "").strip() or "/health",
        "instances": [{"base_url": url} for url in lines(post.get("base_urls", ""))],
    }
    if post.get("auth_header_name", "").strip():
        payload["auth_header_name"] = post["auth_header_name"].strip()
        payload["auth_header_value"] = post.get("auth_header_value", "")
    data = AgentCreateIn(data=payload)
    if not data.is_valid():
        errors = serializer_errors(data.errors)
        if "instances" in errors:
            errors["base_urls"] = errors.pop("instances")
        return None, errors
    fields = dict(data.validated_data)
    instances = fields.pop("instances")
    try:
        return services.agent_create(project=request.project, fields=fields, instances=instances), {}
    except EulerError as exc:
        return None, {field_for_code(exc.code, _SERVICE_FIELDS): error_message(exc)}


@project_page
def agents(request):
    listed = sources.agents_for(request.project)
    context = {"agents": listed, "errors": {}, "values": {}}
    if request.method == "POST" and listed is not None:
        agent, errors = _register(request)
        if agent is not None:
            return redirect("agent-detail", name=agent.name)
        context.update(errors=errors, values=request.POST)
        return render(request, "console/agents.html", context, status=400)
    return render(request, "console/agents.html", context)


def _service_of(agent) -> dict | None:
    """A service's agent: its replicas (where each runs, its health) and scaling events, for the agent's page."""
    Service = sources.model("services", "Service")
    if Service is None or not agent.service_managed:
        return None
    service = scoped.services(project=agent.project_id).filter(agent=agent).first()
    if service is None:
        return None
    replicas = list(service.replica_set.exclude(state="ended").select_related("instance").order_by("id"))
    return {
        "row": service,
        "replicas": replicas,
        "ready": sum(1 for r in replicas if r.state == "ready"),
        "events": list(service.events.all()[:20]),
    }


@project_page
def agent_detail(request, name: str):
    Agent = sources.model("agents", "Agent")
    if Agent is None:
        raise Http404
    agent = scoped.agents(project=request.project).filter(name=name).prefetch_related("instances").first()
    if agent is None:
        raise Http404
    window = request.GET.get("window", "24h")
    if window not in WINDOWS:
        window = "24h"
    step, count = WINDOWS[window]
    now = timezone.now()
    start = now - step * count
    Invocation = sources.model("gateway", "Invocation")
    series = []
    if Invocation is not None:
        rows = Invocation.objects.filter(agent=agent, created_at__gte=start).values_list(
            "created_at", "status", "latency_ms"
        )
        series = buckets(rows.iterator(), start=start, step=step, count=count)
    label = "%H:%M" if window != "7d" else "%m-%d %H:%M"
    charts = {
        "calls": [(b["start"].strftime(label), b["calls"]) for b in series],
        "success": [(b["start"].strftime(label), (b["success_rate"] or 0) * 100) for b in series],
        "p50": [(b["start"].strftime(label), b["p50_ms"] or 0) for b in series],
        "p95": [b["p95_ms"] or 0 for b in series],
    }
    totals = {
        "calls": sum(b["calls"] for b in series),
    }
    context = {
        "agent": agent,
        "service": _service_of(agent),
        "instances": list(agent.instances.order_by("id")),
        "window": window,
        "windows": list(WINDOWS),
        "charts": charts,
        "totals": totals,
        "invoke_url": request.build_absolute_uri(f"/api/v1/agents/{agent.name}/invoke/"),
        "titles": {
            "calls": _("Calls"),
            "success": _("Success rate (%)"),
            "latency": _("Latency p50 (bars) and p95 (line), ms"),
        },
    }
    return render(request, "console/agent_detail.html", context)
