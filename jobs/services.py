"""Writes for jobs that users ask for: submit, cancel, retry. The API, console and admin call these."""

from __future__ import annotations

import logging

from django.db import transaction
from django.utils import timezone

import audit
from euler.errors import Conflict, NotFound
from jobs import priorityclasses, stopping, transitions, usage
from jobs.models import Job
from jobs.outputs import inputs as output_inputs
from jobs.states import ACTIVE, ATTEMPT_ACTIVE, TERMINAL, JobState
from jobs.wakeups import schedule_on_commit
from quotas import scoped

log = logging.getLogger(__name__)


def check_references(*, project, spec: dict) -> None:
    """The ids that a submission names (`inputs_from`, `depends_on`) resolve in `project` (quotas.scoped): another
    project's answers 404, as at submit. A schedule's job is checked with this when it is created or changed."""
    output_inputs.check_inputs(project=project, inputs=spec.get("inputs_from") or [])
    depends_on = spec.get("depends_on") or []
    scoped.job_ids(project=project, ids=[d["job"] for d in depends_on if "job" in d], field="depends_on")
    scoped.array_ids(project=project, ids=[d["array"] for d in depends_on if "array" in d], field="depends_on")


@transaction.atomic
def job_submit(*, project, spec: dict, by=None) -> Job:
    """A new queued job from a validated spec (see jobs.validation); with `depends_on`, a waiting one
    (jobs.arrays.submit_waiting). An `array` spec goes to jobs.arrays.array_submit instead."""
    usage.check_budget(project=project, gpu_count=spec.get("gpu_count", 0))
    output_inputs.check_inputs(project=project, inputs=spec.get("inputs_from") or [])
    priorityclasses.apply(project=project, spec=spec)
    spec.pop("array", None)
    depends_on = spec.pop("depends_on", None)
    if depends_on:
        from jobs import arrays

        return arrays.submit_waiting(project=project, spec=spec, depends_on=depends_on, by=by)
    env = spec.pop("env", None) or None
    job = Job.objects.create(
        project=project, env=env, has_env=bool(env), created_by=by, queued_at=timezone.now(), **spec
    )
    transitions.created(job)
    schedule_on_commit(here=True)
    return job


def _locked(job_id: int, project) -> Job:
    """The project's job, row-locked (env is decrypted only for a node); another project's is a 404."""
    job_id = scoped.as_id(job_id)
    job = scoped.jobs(project=project).select_for_update().filter(pk=job_id).defer("env").first() if job_id else None
    if job is None:
        raise NotFound("No such job.")
    return job


@transaction.atomic
def job_cancel(*, job_id: int, project, by=None) -> Job:
    """Queued → cancelled at once; assigned/running → cancelled, and the node is told to stop the container."""
    job = _locked(job_id, project)
    attempt = job.current_attempt if job.state in ACTIVE else None
    transitions.move(
        job, JobState.CANCELLED, attempt=attempt, why="cancelled", note="cancelled by user", reason="cancelled"
    )
    audit.record("job.cancelled", project=project, target=f"job:{job.pk}", details={"name": job.name}, by=by)
    if attempt is not None and attempt.is_active:
        # The attempt keeps its resources until the node says the container is gone (SIGTERM, its grace, SIGKILL).
        attempt.job = job
        stopping.request_stop(
            attempt,
            reason=stopping.Reason.CANCEL,
            requeue=False,
            count_as_failure=False,
            by=getattr(by, "username", None) or "user",
        )
    return job


@transaction.atomic
def job_retry(*, job_id: int, project, by=None) -> Job:
    """An ended job goes back to the queue for a new attempt, with its automatic retries renewed."""
    job = _locked(job_id, project)
    if job.state not in TERMINAL:
        raise Conflict(f"Only an ended job can be retried; this one is {job.state}.", code="invalid_transition")
    stopping = scoped.attempts(project=project).filter(pk=job.current_attempt_id, state__in=ATTEMPT_ACTIVE)
    if job.current_attempt_id and stopping.exists():
        raise Conflict("The previous attempt is still being stopped; retry in a few seconds.", code="attempt_stopping")
    from jobs import arrays, deps

    if deps.failed_dependency(job_id=job.pk, array_id=job.array_id):
        raise Conflict("A dependency of this job can never be met.", code="dependency_failed")
    if job.array_id:  # a task waits for a slot of its array
        arrays.requeue_tasks(job.array, [job], note="retried by user")
        audit.record("job.retried", project=project, target=f"job:{job.pk}", details={"name": job.name}, by=by)
        return job
    transitions.move(
        job,
        JobState.QUEUED,
        why="retry",
        note="retried by user",
        current_attempt=None,
        retries_used=0,
        not_before=None,
        exit_code=None,
        reason="",
        preempt_immune=False,
    )
    audit.record("job.retried", project=project, target=f"job:{job.pk}", details={"name": job.name}, by=by)
    schedule_on_commit()
    return job
