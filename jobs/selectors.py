"""Reads for jobs, always scoped to the caller's project; env is never loaded here."""

from __future__ import annotations

from django.db.models import Prefetch, QuerySet

from euler.errors import InvalidInput, NotFound
from jobs.models import Attempt, Job, JobEvent
from jobs.states import JobState


def job_list(*, project, state: str | None = None) -> QuerySet[Job]:
    qs = Job.objects.filter(project=project).defer("env").order_by("-created_at", "-id")
    if state:
        states = [s for s in state.split(",") if s]
        bad = [s for s in states if s not in JobState.values]
        if bad:
            raise InvalidInput(f"Unknown state {bad[0][:32]!r}.", code="invalid_state")
        qs = qs.filter(state__in=states)
    return qs


def job_get(*, project, job_id) -> Job:
    try:
        job_id = int(job_id)
    except (TypeError, ValueError):
        raise NotFound("No such job.") from None
    job = (
        Job.objects.filter(project=project, pk=job_id)
        .defer("env")
        .prefetch_related(
            Prefetch("attempts", queryset=Attempt.objects.order_by("number")),
            Prefetch("events", queryset=JobEvent.objects.order_by("created_at", "id")),
        )
        .first()
    )
    if job is None:
        raise NotFound("No such job.")
    return job
