"""A job's inputs as the caller names them: the submit check (`inputs_from`, for a job and for an array) and the
scheduler's gate with its pending reasons. Both read through quotas.scoped in the job's own project, so another
project's job answers 404 at submit and reads as no job at all in a pending reason."""

from __future__ import annotations

from collections import defaultdict

from euler.errors import InvalidInput
from jobs.models import Job
from jobs.states import TERMINAL
from quotas import scoped


def check_inputs(*, project, inputs: list[dict]) -> None:
    """Each input names a job of this project (else 404, like any other cross-project reference) that declared
    an output its path falls under (else 400 `no_such_output`), or, once that job stored its outputs, one of them."""
    for item in inputs:
        job = scoped.job(project=project, job_id=item["job"], field="inputs_from")
        declared = [p.rsplit("/", 1)[-1] for p in (job.outputs or {}).get("paths", [])]
        path = item["path"]
        if not any(path == name or path.startswith(name + "/") for name in declared):
            raise InvalidInput(
                f"Job {job.pk} declares no output {path!r} (its outputs are listed under {declared or 'nothing'}).",
                code="no_such_output",
            )
        stored = scoped.outputs(project=project).filter(job=job, complete=True)
        if stored.exists() and not stored.filter(path=path).exists():
            raise InvalidInput(
                f"Job {job.pk} stored no output {path!r} (`euler outputs {job.pk}`).", code="no_such_output"
            )


def input_reason(item: dict, *, stored: bool, state: str | None) -> str | None:
    """Why a job waits for one input (None: it is stored); `state` is the named job's state in the waiting job's own
    project, None when there is no such job there (removed, or never this project's: the same words)."""
    if stored:
        return None
    if state is None:
        return f"input {item['path']} of job {item['job']}: no such job in this project (cancel this job)"
    if state in TERMINAL:
        return f"input {item['path']} of job {item['job']}: that job ended without it (cancel this job)"
    return f"waiting for job {item['job']} to store its output {item['path']}"


def inputs_waiting(jobs: list[Job]) -> dict[int, str]:
    """The scheduler's gate: queued jobs whose inputs are not all stored yet, with the reason each waits. Two
    queries per project that has such jobs in the batch, each filtered by that project."""
    by_project: dict[int, list[Job]] = defaultdict(list)
    for job in jobs:
        if job.inputs_from:
            by_project[job.project_id].append(job)
    waiting = {}
    for project_id, wanted in by_project.items():
        refs = {i["job"] for job in wanted for i in job.inputs_from}
        paths = {i["path"] for job in wanted for i in job.inputs_from}
        have = set(
            scoped.outputs(project=project_id)
            .filter(job_id__in=refs, path__in=paths, complete=True)
            .values_list("job_id", "path")
        )
        states = dict(scoped.jobs(project=project_id).filter(pk__in=refs).values_list("pk", "state"))
        for job in wanted:
            for item in job.inputs_from:
                why = input_reason(item, stored=(item["job"], item["path"]) in have, state=states.get(item["job"]))
                if why:
                    waiting[job.pk] = why
                    break
    return waiting
