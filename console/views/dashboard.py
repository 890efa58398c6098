"""The dashboard: jobs, nodes, calls today and quota bars at a glance."""

from django.shortcuts import render

from console import sources
from console.present import quota_rows
from console.views.common import project_page
from quotas.selectors import project_summary


@project_page
def dashboard(request):
    project = request.project
    return render(
        request,
        "console/dashboard.html",
        {
            "quota_rows": quota_rows(project_summary(project)),
            "jobs": sources.job_counts(project),
            "nodes": sources.nodes_for(project),
            "calls_today": sources.calls_today(project),
        },
    )
