"""Usage: quota bars and daily charts for the current period, from the usage ledger."""

from datetime import timedelta

from django.db.models import Sum
from django.shortcuts import render
from django.utils import timezone
from django.utils.translation import gettext as _

from console.charts import daily_series
from console.present import quota_rows
from console.views.common import project_page
from quotas.models import Resource, UsageEntry
from quotas.selectors import project_summary

DAYS = 30


@project_page
def usage(request):
    project = request.project
    today = timezone.now().date()
    days = [today - timedelta(days=DAYS - 1 - i) for i in range(DAYS)]
    rows = (
        UsageEntry.objects.filter(project=project, day__gte=days[0])
        .values("day", "resource")
        .annotate(total=Sum("amount"))
    )
    per_resource: dict[str, list] = {r.value: [] for r in Resource}
    for row in rows:
        per_resource.setdefault(row["resource"], []).append((row["day"], row["total"]))
    hours = {Resource.CPU_CORE_SECONDS, Resource.GPU_SECONDS}
    titles = {
        Resource.CPU_CORE_SECONDS: _("CPU core-hours per day"),
        Resource.GPU_SECONDS: _("GPU-hours per day"),
        Resource.INVOCATIONS: _("Agent calls per day"),
    }
    charts = []
    for resource, title in titles.items():
        points = daily_series(per_resource.get(resource, []), days)
        if resource in hours:
            points = [(label, value / 3600.0) for label, value in points]
        charts.append({"title": title, "points": points})
    agents = (
        UsageEntry.objects.filter(project=project, day__gte=days[0], resource=Resource.INVOCATIONS)
        .exclude(agent_name="")
        .values("agent_name")
        .annotate(total=Sum("amount"))
        .order_by("-total")[:20]
    )
    summary = project_summary(project)
    return render(
        request,
        "console/usage.html",
        {"quota_rows": quota_rows(summary), "period": summary["period"], "charts": charts, "agents": agents},
    )
