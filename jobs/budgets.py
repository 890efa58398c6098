"""Budget enforcement: meter running attempts and stop the jobs of projects past their CPU or GPU budget."""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from jobs import stopping, transitions, usage
from jobs.models import Attempt
from jobs.states import ATTEMPT_ACTIVE, AttemptState
from quotas.models import Project, Quota
from quotas.selectors import project_usage


def over_budget(*, project_id: int) -> set[str]:
    """The resources whose use passed the budget by more than EULER_QUOTA_GRACE."""
    quota = Quota.objects.filter(project_id=project_id).first()
    if quota is None:
        return set()
    used = project_usage(Project(pk=project_id))
    grace = 1 + settings.EULER_QUOTA_GRACE
    limits = {"cpu_core_seconds": quota.cpu_core_seconds, "gpu_seconds": quota.gpu_seconds}
    return {name for name, limit in limits.items() if used.get(name, 0.0) > limit * grace}


def enforce_budgets(*, now: datetime | None = None) -> int:
    """Meter running attempts not booked for METER_EVERY, then stop the running jobs of projects past their budget
    (plus grace): all of them for CPU, the GPU ones for GPU. Returns how many attempts were stopped."""
    now = now or timezone.now()
    running = list(
        Attempt.objects.filter(state=AttemptState.RUNNING).values(
            "pk", "job__project_id", "started_at", "metered_until"
        )
    )
    for row in running:
        if usage.meter_due(row, now):
            usage.meter(attempt_id=row["pk"], until=now)
    stopped = 0
    for project_id in sorted({row["job__project_id"] for row in running}):
        over = over_budget(project_id=project_id)
        if not over:
            continue
        victims = Attempt.objects.filter(job__project_id=project_id, state__in=ATTEMPT_ACTIVE, stop_reason="")
        if "cpu_core_seconds" not in over:
            victims = victims.exclude(gpu_uuids=[])
        resource = "CPU core-seconds" if "cpu_core_seconds" in over else "GPU-seconds"
        for attempt_id, job_id in victims.values_list("pk", "job_id"):
            with transaction.atomic():
                job = transitions.lock(job_id)
                attempt = Attempt.objects.filter(pk=attempt_id).first() if job is not None else None
                if attempt is None:
                    continue
                attempt.job = job
                # SIGTERM, its grace, SIGKILL; the attempt then fails `quota_exceeded` (jobs/stopping.py).
                if stopping.request_stop(
                    attempt,
                    reason=stopping.Reason.BUDGET,
                    requeue=False,
                    count_as_failure=True,
                    by="budget",
                    message=f"the project used its {resource} budget for this period",
                    now=now,
                ):
                    stopped += 1
    return stopped
