"""Reads for jobs, always scoped to the caller's project; env is never loaded here."""

from __future__ import annotations

from django.db.models import QuerySet

from euler.errors import InvalidInput, NotFound
from euler.prepared import Prepared
from jobs.models import Job, JobEvent
from jobs.states import JobState
from jobs.workflow_models import Dependency, JobArray
from quotas import scoped


def job_list(*, project, state: str | None = None, array=None) -> QuerySet[Job]:
    """The project's jobs, newest first; array tasks only when `array` names their array (an id: another project's,
    like a missing one, is a 404)."""
    qs = scoped.jobs(project=project).defer("env").order_by("-created_at", "-id")
    if array in (None, ""):
        qs = qs.filter(array__isnull=True)
    elif isinstance(array, JobArray):
        qs = qs.filter(array=array)
    else:
        if not str(array).isdigit():
            raise InvalidInput("array is an array's id.", code="invalid_array")
        qs = qs.filter(array=scoped.array(project=project, array_id=array, field="array"))
    if state:
        states = [s for s in state.split(",") if s]
        bad = [s for s in states if s not in JobState.values]
        if bad:
            raise InvalidInput(f"Unknown state {bad[0][:32]!r}.", code="invalid_state")
        qs = qs.filter(state__in=states)
    return qs


# A job's read (its detail, the submit's answer, the blocking read's): four statements compiled once
# (euler/prepared.py), each through the project's door, its related rows set as prefetch_related would set them.
_JOB = Prepared(lambda project_id, job_id: scoped.jobs(project=project_id).filter(pk=job_id).defer("env")[:1])
_RELATED = {
    "attempts": Prepared(
        lambda project_id, job_id: scoped.attempts(project=project_id).filter(job_id=job_id).order_by("number")
    ),
    "events": Prepared(
        lambda project_id, job_id: JobEvent.objects.filter(job__project=project_id, job_id=job_id).order_by(
            "created_at", "id"
        )
    ),
    "dependencies": Prepared(
        lambda project_id, job_id: Dependency.objects.filter(job__project=project_id, job_id=job_id).order_by("id")
    ),
}


def job_get(*, project, job_id) -> Job:
    """The project's job with its attempts (by number), events (in order) and dependencies, env not loaded."""
    job_id = scoped.as_id(job_id)
    if job_id is None:
        raise NotFound("No such job.")
    job = _JOB.first(project.pk, job_id)
    if job is None:
        raise NotFound("No such job.")
    for name, rows in _RELATED.items():
        _prefetched(job, name, rows(project.pk, job_id))
    return job


def _prefetched(obj, name: str, rows: list) -> None:
    """`obj.<name>.all()` answers `rows` without a query, each row's own link back set to `obj`, as Django's
    prefetch_related leaves a reverse foreign key (django.db.models.query.prefetch_one_level)."""
    manager = getattr(obj, name)
    for row in rows:
        manager.field.set_cached_value(row, obj)
    qs = manager.get_queryset()
    qs._result_cache = rows
    qs._prefetch_done = True
    obj.__dict__.setdefault("_prefetched_objects_cache", {})[manager.field.remote_field.cache_name] = qs


def project_share(*, project) -> dict:
    """The project's fair share now: what its active attempts hold of the capacity it may use (the shared pool
    plus its own nodes), on the dominant resource, and the share the scheduler orders by: that (blended with its
    decayed recent usage when EULER_FAIRSHARE_HALF_LIFE is set) divided by its weight.
    """
    from django.db.models import Q

    from jobs.scheduling import fairshare
    from jobs.scheduling.cycle import project_limits
    from nodes.models import Approval, Node

    capacity = [0.0, 0.0, 0.0]
    usable = Node.objects.filter(approval=Approval.APPROVED, online=True, draining=False, reclaimed_at=None).filter(
        Q(trust="platform") | Q(trust="community", public_pool=True) | Q(owner_project=project)
    )  # the rows fairshare.pool_capacity counts for this project, filtered in the database
    for cpu, mem, gpus in usable.values_list("cpu_milli", "memory_bytes", "gpus"):
        capacity[0] += cpu
        capacity[1] += mem
        capacity[2] += len(gpus or [])
    limit = project_limits({project.pk})[project.pk]  # held, weight and recent usage as the scheduler reads them
    held = limit.held
    holds, which = fairshare.dominant(held, (capacity[0], capacity[1], capacity[2]))
    counted = fairshare.dominant(fairshare.blended(held, limit.recent), (capacity[0], capacity[1], capacity[2]))[0]
    names = ("cpu_milli", "memory_bytes", "gpus")
    weight = limit.weight if limit.weight > 0 else 1.0
    return {
        "weight": project.weight,
        "holds": round(holds, 4),
        "share": round(counted / weight, 4),
        "dominant_resource": names[which] if holds > 0 else None,
        "held": {name: int(v) for name, v in zip(names, held, strict=True)},
        "capacity": {name: int(v) for name, v in zip(names, capacity, strict=True)},
    }
