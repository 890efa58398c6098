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


def project_share(*, project) -> dict:
    """The project's fair share now: what its active attempts hold of the capacity it may use (the shared pool
    plus its own nodes), on the dominant resource, and that divided by its weight (what the scheduler orders by).
    """
    from django.db.models import Q, Sum

    from jobs.scheduling import fairshare
    from jobs.states import ATTEMPT_ACTIVE
    from nodes.models import Approval, Node

    capacity = [0.0, 0.0, 0.0]
    usable = Node.objects.filter(approval=Approval.APPROVED, online=True, draining=False).filter(
        Q(trust="platform") | Q(trust="community", public_pool=True) | Q(owner_project=project)
    )
    for cpu, mem, gpus in usable.values_list("cpu_milli", "memory_bytes", "gpus"):
        capacity[0] += cpu
        capacity[1] += mem
        capacity[2] += len(gpus or [])
    row = Attempt.objects.filter(job__project=project, state__in=ATTEMPT_ACTIVE).aggregate(
        cpu=Sum("cpu_milli"), mem=Sum("memory_bytes"), gpus=Sum("job__gpu_count")
    )
    held = (float(row["cpu"] or 0), float(row["mem"] or 0), float(row["gpus"] or 0))
    holds, which = fairshare.dominant(held, (capacity[0], capacity[1], capacity[2]))
    names = ("cpu_milli", "memory_bytes", "gpus")
    weight = project.weight if project.weight > 0 else 1.0
    return {
        "weight": project.weight,
        "holds": round(holds, 4),
        "share": round(holds / weight, 4),
        "dominant_resource": names[which] if holds > 0 else None,
        "held": {name: int(v) for name, v in zip(names, held, strict=True)},
        "capacity": {name: int(v) for name, v in zip(names, capacity, strict=True)},
    }
