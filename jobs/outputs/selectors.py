"""Reads of outputs: a job's files for its project, an input for the node that may fetch it, what a project
stores, and what an assignment carries (the outputs to collect, the inputs to place)."""

from __future__ import annotations

from django.conf import settings
from django.db.models import Sum, Value
from django.db.models.functions import Greatest

from euler.errors import NotFound
from jobs import fencing
from jobs.models import Job
from jobs.outputs import rules, store
from jobs.outputs.models import OutputFile
from nodeagent import protocol
from quotas import scoped


def project_job(*, project, job_id: int) -> Job:
    return scoped.job(project=project, job_id=job_id)


def job_files(*, job: Job):
    return OutputFile.objects.filter(job=job, complete=True).order_by("path")


def job_file(*, job: Job, path: str) -> OutputFile:
    row = OutputFile.objects.filter(job=job, complete=True, path=path).order_by("-pk").first()
    if row is None:
        raise NotFound(f"Job {job.pk} has no output {path[:200]!r}.", code="no_such_output")
    return row


def charged_bytes(*, project_id: int, besides=None) -> int:
    """What the project's output files count against its quota: each file its size, at least
    rules.FILE_CHARGE_MIN_BYTES (held for uploads under way too), and its jobs' checkpoint blobs likewise; `besides`:
    leave out that attempt's output files."""
    rows = scoped.outputs(project=project_id)
    if besides is not None:
        rows = rows.exclude(attempt=besides)
    charged = Greatest("size", Value(rules.FILE_CHARGE_MIN_BYTES))
    blobs = scoped.checkpoint_blobs(project=project_id)  # checkpoints count too, each blob once (jobs/checkpoints)
    return (rows.aggregate(n=Sum(charged))["n"] or 0) + (blobs.aggregate(n=Sum(charged))["n"] or 0)


def stored_bytes(*, project) -> int:
    """Bytes of output the project stores (and holds for uploads under way) as its quota counts them."""
    return charged_bytes(project_id=project.pk)


def input_for_node(*, node, attempt_id: int, output_id: int) -> OutputFile:
    """The input file, if `node` holds the active attempt `attempt_id` (jobs.fencing, Right.INPUTS: 409
    `stale_attempt` otherwise) and its job names the file in `inputs_from`; else 404."""
    attempt = fencing.attempt_for(node=node, attempt_id=attempt_id, right=fencing.Right.INPUTS)
    job = attempt.job
    row = scoped.outputs(project=job.project_id).filter(pk=output_id, complete=True).first()
    if row is None or not any(i["job"] == row.job_id and i["path"] == row.path for i in job.inputs_from or []):
        raise NotFound("This attempt has no such input.", code="no_such_input")
    return row


def _latest(inputs: list[dict], project_id: int) -> dict[tuple[int, str], OutputFile]:
    if not inputs:
        return {}
    rows = (
        scoped.outputs(project=project_id)
        .filter(
            complete=True,
            job_id__in={i["job"] for i in inputs},
            path__in={i["path"] for i in inputs},
        )
        .order_by("pk")
    )
    return {(r.job_id, r.path): r for r in rows}


def assignment_fields(*, job: Job, attempt) -> dict:
    """`outputs` and `inputs` of the attempt's Assignment."""
    fields: dict = {}
    if job.outputs:
        fields["outputs"] = protocol.OutputSpec(paths=job.outputs["paths"], max_bytes=job.outputs["max_bytes"])
    inputs = list(job.inputs_from or [])
    rows = _latest(inputs, job.project_id)
    files = []
    for item in inputs:
        row = rows.get((item["job"], item["path"]))
        if row is None:
            continue  # removed since the scheduler placed the job (retention): the agent reports it missing
        if store.is_bucket() and row.size:  # an empty file has no object: the node route serves it
            url, authenticated = store.presigned_get(row.storage_key), False
        else:
            path = protocol.PATH_INPUT_FILE.format(attempt_id=attempt.pk, output_id=row.pk)
            url, authenticated = f"{settings.EULER_PUBLIC_URL.rstrip('/')}/node-api/v1/{path}", True
        files.append(protocol.InputFile(output_id=row.pk, url=url, authenticated=authenticated, sha256=row.sha256,
                                        size=row.size, to=item["to"]))  # fmt: skip
    if files:
        fields["inputs"] = files
    return fields
