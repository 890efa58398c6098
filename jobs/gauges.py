"""The jobs app's gauges for /metrics (registered with euler.metrics in JobsConfig.ready)."""

from __future__ import annotations

from django.db.models import Count


def job_gauges() -> list[str]:
    from jobs.models import Job

    lines = ["# HELP euler_jobs Jobs by state", "# TYPE euler_jobs gauge"]
    for row in Job.objects.values("state").annotate(n=Count("id")).order_by("state"):
        lines.append(f'euler_jobs{{state="{row["state"]}"}} {row["n"]}')
    queued = Job.objects.filter(state="queued").count()
    return [
        *lines,
        "# HELP euler_queue_depth Queued jobs",
        "# TYPE euler_queue_depth gauge",
        f"euler_queue_depth {queued}",
    ]
