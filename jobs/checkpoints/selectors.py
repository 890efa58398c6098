"""Reads of checkpoints: what an assignment carries (the spec, the checkpoint to restore), the restore list and a
blob's bytes for the node that holds the attempt, and a job's checkpoints for its project."""

from __future__ import annotations

from django.conf import settings

from euler.errors import NotFound
from jobs import fencing
from jobs.checkpoints import rules
from jobs.checkpoints.models import Checkpoint, CheckpointBlob, CheckpointState
from jobs.models import Job, JobEvent
from jobs.outputs import store
from nodeagent import protocol
from quotas import scoped


def latest_committed(job: Job) -> Checkpoint | None:
    return Checkpoint.objects.filter(job=job, state=CheckpointState.COMMITTED).order_by("-seq").first()


def assignment_fields(*, job: Job) -> dict:
    """`checkpoint` of an attempt's Assignment: the job's directory and the latest committed checkpoint, if any."""
    if not job.checkpoint:
        return {}
    latest = latest_committed(job)
    spec = protocol.CheckpointSpec(path=job.checkpoint["path"], interval_seconds=job.checkpoint["interval_seconds"],
                                   restore_id=latest.pk if latest else None)  # fmt: skip
    return {"checkpoint": spec}


def restore_for_node(*, node, attempt_id: int) -> protocol.CheckpointRestore:
    """The latest committed checkpoint of the attempt's job, file by file, for the node that holds the (active)
    attempt; 404 `no_checkpoint` when there is none. A pending checkpoint is never listed."""
    attempt = fencing.attempt_for(node=node, attempt_id=attempt_id, right=fencing.Right.CHECKPOINTS)
    latest = latest_committed(attempt.job)
    if latest is None:
        raise NotFound("This job has no committed checkpoint.", code="no_checkpoint")
    blobs = {b.sha256: b for b in CheckpointBlob.objects.filter(job=attempt.job, complete=True,
                                                                 sha256__in={f["sha256"] for f in latest.files})}  # fmt: skip
    base = settings.EULER_PUBLIC_URL.rstrip("/")
    files = []
    for f in latest.files:
        blob = blobs[f["sha256"]]  # a committed checkpoint's blobs are kept while it is (retention)
        if store.is_bucket() and blob.size:
            url, authenticated = store.presigned_get(blob.storage_key), False
        else:
            path = protocol.PATH_ATTEMPT_CHECKPOINT_BLOB_DATA.format(attempt_id=attempt.pk, blob_id=blob.pk)
            url, authenticated = f"{base}/node-api/v1/{path}", True
        files.append(protocol.RestoreFile(path=f["path"], size=f["size"], sha256=f["sha256"], url=url,
                                          authenticated=authenticated))  # fmt: skip
    return protocol.CheckpointRestore(checkpoint_id=latest.pk, seq=latest.seq, files=files)


def blob_for_node(*, node, attempt_id: int, blob_id: int) -> CheckpointBlob:
    """A complete blob of the attempt's job, for the node that holds the active attempt (to restore it)."""
    attempt = fencing.attempt_for(node=node, attempt_id=attempt_id, right=fencing.Right.CHECKPOINTS)
    blob = CheckpointBlob.objects.filter(pk=blob_id, job=attempt.job, complete=True).first()
    if blob is None:
        raise NotFound("This job has no such checkpoint blob.", code="no_such_blob")
    return blob


# --- the project's reads -------------------------------------------------------------------------------------------
def job_checkpoints(*, job: Job):
    """The job's committed checkpoints, newest first (the caller resolved the job in its project)."""
    return scoped.checkpoints(project=job.project_id).filter(job=job, state=CheckpointState.COMMITTED).order_by("-seq")


def job_checkpoint(*, job: Job, which: str) -> Checkpoint:
    """`latest` or a checkpoint's seq (as `euler checkpoints` lists it), committed; else 404 `no_such_checkpoint`."""
    rows = job_checkpoints(job=job)
    row = rows.first() if which == "latest" else (rows.filter(seq=int(which)).first() if which.isdigit() else None)
    if row is None:
        raise NotFound(f"Job {job.pk} has no committed checkpoint {which[:20]!r}.", code="no_such_checkpoint")
    return row


def blobs_of(*, checkpoint: Checkpoint) -> dict[str, CheckpointBlob]:
    shas = {f["sha256"] for f in checkpoint.files}
    return {b.sha256: b for b in scoped.checkpoint_blobs(project=checkpoint.project_id).filter(
        job_id=checkpoint.job_id, sha256__in=shas)}  # fmt: skip


def last_refusal(*, job: Job) -> JobEvent | None:
    return JobEvent.objects.filter(job=job, reason=rules.REFUSED_REASON).order_by("-pk").first()
