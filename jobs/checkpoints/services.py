"""Writes of checkpoints from a node: plan a manifest (a pending checkpoint, the blobs to send), take a blob's
chunks or check its bucket upload, commit the set, and retention (keep_last; blobs no checkpoint names go).

Every node route passes jobs.fencing (Right.CHECKPOINTS: only while the attempt is active, so a stop's checkpoint
is taken between the container's exit and the `ended` report, never after). A refusal (the shared limits, the
project's output quota) is recorded on the job as an event before the node is answered, so the user sees why."""

from __future__ import annotations

import uuid

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from euler.errors import Conflict, EulerError, InvalidInput, NotFound
from jobs import fencing
from jobs.checkpoints import rules
from jobs.checkpoints.models import Checkpoint, CheckpointBlob, CheckpointState
from jobs.models import Attempt, Job, JobEvent
from jobs.outputs import chunks, keepalive, store
from jobs.outputs import selectors as output_selectors
from jobs.outputs.services import EMPTY_SHA256
from nodeagent import protocol

REFUSED_REASON = rules.REFUSED_REASON


class CheckpointRefused(EulerError):
    code = "checkpoint_refused"
    status_code = 422


def _of(node, attempt_id: int, *, lock: fencing.Lock) -> Attempt:
    return fencing.attempt_for(node=node, attempt_id=attempt_id, right=fencing.Right.CHECKPOINTS, lock=lock)


def note_refused(*, job: Job, attempt: Attempt | None, message: str) -> None:
    """Say on the job why a checkpoint was not taken (its event log; the checkpoints API shows the latest)."""
    JobEvent.objects.create(job=job, attempt=attempt, from_state=job.state, to_state=job.state,
                            reason=REFUSED_REASON, message=f"checkpoint not taken: {message}"[:1000])  # fmt: skip


def _quota_left(job: Job) -> int:
    from quotas.models import Quota

    # The quota row, locked: two uploads of one project plan one after the other, so both cannot take the rest.
    limit = Quota.objects.select_for_update().filter(project_id=job.project_id).values_list("output_bytes", flat=True)
    limit = limit.first()
    if limit is None:
        return 0
    return max(0, limit - output_selectors.charged_bytes(project_id=job.project_id))


def _upload(blob: CheckpointBlob) -> protocol.BlobUpload:
    if store.is_bucket():
        url, headers = store.presigned_put(blob.storage_key, sha256=blob.sha256, size=blob.size)
        return protocol.BlobUpload(blob_id=blob.pk, sha256=blob.sha256, size=blob.size, method="put", url=url,
                                   headers=headers)  # fmt: skip
    return protocol.BlobUpload(blob_id=blob.pk, sha256=blob.sha256, size=blob.size, method="chunks",
                               offset=blob.received)  # fmt: skip


def plan_checkpoint(*, node, attempt_id: int, manifest: protocol.CheckpointManifest) -> protocol.CheckpointPlan:
    """A pending checkpoint of the manifest's files and the blobs to send; or 422 with the reason, recorded."""
    result = _plan(node=node, attempt_id=attempt_id, manifest=manifest)
    if isinstance(result, rules.Refusal):
        _record_refusal(node=node, attempt_id=attempt_id, message=result.message)
        raise CheckpointRefused(result.message, code=result.code)
    return result


@transaction.atomic
def _record_refusal(*, node, attempt_id: int, message: str) -> None:
    attempt = _of(node, attempt_id, lock=fencing.Lock.ATTEMPT)
    note_refused(job=attempt.job, attempt=attempt, message=message)


@transaction.atomic
def _plan(*, node, attempt_id: int, manifest: protocol.CheckpointManifest):
    attempt = _of(node, attempt_id, lock=fencing.Lock.JOB)
    job = attempt.job
    if not job.checkpoint:
        raise InvalidInput("This job declared no checkpoint.", code="no_checkpoint_declared")
    if manifest.refused:
        return rules.Refusal("checkpoint_refused", f"{manifest.reason}: {manifest.refused}")
    held = dict(CheckpointBlob.objects.filter(job=job).values_list("sha256", "pk"))
    refusal = rules.check_manifest(list(manifest.files), held=set(held), quota_left=_quota_left(job))
    if refusal is not None:
        return rules.Refusal(refusal.code, f"{manifest.reason}: {refusal.message}")
    fresh = {}
    for f in manifest.files:
        if f.sha256 not in held and f.sha256 not in fresh:
            fresh[f.sha256] = CheckpointBlob(job=job, project_id=job.project_id, sha256=f.sha256, size=f.size,
                                             storage_key=f"ckpt/{job.pk}/{uuid.uuid4().hex}",
                                             complete=f.size == 0 and f.sha256 == EMPTY_SHA256)  # fmt: skip
    CheckpointBlob.objects.bulk_create(fresh.values(), batch_size=1000)
    seq = (Checkpoint.objects.filter(job=job).aggregate(n=Max("seq"))["n"] or 0) + 1
    files = [{"path": f.path, "size": f.size, "sha256": f.sha256} for f in manifest.files]
    checkpoint = Checkpoint.objects.create(job=job, attempt=attempt, attempt_number=attempt.number,
                                           project_id=job.project_id, seq=seq, reason=manifest.reason,
                                           size=sum(f.size for f in manifest.files), files_count=len(files),
                                           skipped=manifest.skipped, files=files)  # fmt: skip
    wanted = {f.sha256 for f in manifest.files}
    missing = CheckpointBlob.objects.filter(job=job, sha256__in=wanted, complete=False).order_by("pk")
    return protocol.CheckpointPlan(checkpoint_id=checkpoint.pk, seq=seq, uploads=[_upload(b) for b in missing])


# --- blobs ----------------------------------------------------------------------------------------------------
def _blob(job: Job, blob_id: int, *, lock: bool) -> CheckpointBlob:
    rows = CheckpointBlob.objects.filter(pk=blob_id, job=job)
    blob = (rows.select_for_update() if lock else rows).first()
    if blob is None:
        raise NotFound("This job has no such checkpoint blob.", code="no_such_blob")
    return blob


def blob_state(*, node, attempt_id: int, blob_id: int) -> protocol.OutputFileReply:
    attempt = _of(node, attempt_id, lock=fencing.Lock.NONE)
    blob = _blob(attempt.job, blob_id, lock=False)
    return protocol.OutputFileReply(offset=blob.size if blob.complete else blob.received, complete=blob.complete)


class _Mismatch(InvalidInput):
    code = "sha256_mismatch"
    message = "The blob's bytes do not match its sha256: send it again from offset 0."

    def __init__(self):
        super().__init__(extra={"offset": 0})


def receive_chunk(*, node, attempt_id: int, blob_id: int, content_range: str | None, data: bytes):
    reply = _receive(node=node, attempt_id=attempt_id, blob_id=blob_id, content_range=content_range, data=data)
    if reply is None:
        raise _Mismatch()
    return reply


@transaction.atomic
def _receive(*, node, attempt_id: int, blob_id: int, content_range: str | None, data: bytes):
    attempt = _of(node, attempt_id, lock=fencing.Lock.ATTEMPT)
    blob = _blob(attempt.job, blob_id, lock=True)
    took = chunks.take(blob, content_range=content_range, data=data, stored="checkpoints", noun="blob")
    if took is chunks.Took.HELD:
        return protocol.OutputFileReply(offset=blob.size, complete=True)
    if took is chunks.Took.MISMATCH:
        CheckpointBlob.objects.filter(pk=blob.pk).update(received=0)
        return None
    blob.save(update_fields=["received", "complete"])
    keepalive.on_progress(attempt=attempt)  # a stop's checkpoint sending after a timeout holds the backstop too
    return protocol.OutputFileReply(offset=blob.received, complete=blob.complete)


@transaction.atomic
def blob_done(*, node, attempt_id: int, blob_id: int) -> protocol.OutputFileReply:
    """A presigned PUT finished: check the object (size, sha256) and mark the blob complete."""
    attempt = _of(node, attempt_id, lock=fencing.Lock.ATTEMPT)
    blob = _blob(attempt.job, blob_id, lock=True)
    if blob.complete or not store.is_bucket():
        return protocol.OutputFileReply(offset=blob.size if blob.complete else blob.received, complete=blob.complete)
    why = store.bucket_check(blob.storage_key, size=blob.size, sha256=blob.sha256)
    if why:
        raise InvalidInput(f"The upload is not the blob the manifest described: {why}.", code="sha256_mismatch",
                           extra={"offset": 0})  # fmt: skip
    blob.received, blob.complete = blob.size, True
    blob.save(update_fields=["received", "complete"])
    keepalive.on_progress(attempt=attempt)
    return protocol.OutputFileReply(offset=blob.size, complete=True)


# --- commit and retention ------------------------------------------------------------------------------------------
@transaction.atomic
def commit(*, node, attempt_id: int, checkpoint_id: int) -> protocol.CheckpointCommitted:
    """Commit the attempt's pending checkpoint as one set: only when every blob it names is stored and verified
    (else 409 `checkpoint_incomplete`, nothing changes). Then retention keeps the job's newest `keep_last`."""
    attempt = _of(node, attempt_id, lock=fencing.Lock.JOB)
    job = attempt.job
    checkpoint = Checkpoint.objects.select_for_update().filter(pk=checkpoint_id, job=job, attempt=attempt).first()
    if checkpoint is None:
        raise NotFound("This attempt has no such checkpoint.", code="no_such_checkpoint")
    if checkpoint.state == CheckpointState.COMMITTED:
        return protocol.CheckpointCommitted(checkpoint_id=checkpoint.pk, seq=checkpoint.seq, committed=True)
    wanted = {f["sha256"] for f in checkpoint.files}
    stored = set(
        CheckpointBlob.objects.filter(job=job, sha256__in=wanted, complete=True).values_list("sha256", flat=True)
    )
    if wanted - stored:
        raise Conflict(f"{len(wanted - stored)} of the checkpoint's {len(wanted)} blobs are not stored yet.",
                       code="checkpoint_incomplete")  # fmt: skip
    checkpoint.state, checkpoint.committed_at = CheckpointState.COMMITTED, timezone.now()
    checkpoint.save(update_fields=["state", "committed_at"])
    retain(job=job, keep_last=(job.checkpoint or {}).get("keep_last", 2), current_attempt=attempt)
    return protocol.CheckpointCommitted(checkpoint_id=checkpoint.pk, seq=checkpoint.seq, committed=True)


def retain(*, job: Job, keep_last: int, current_attempt: Attempt | None) -> None:
    """The caller holds the job's row. Keep its newest `keep_last` committed checkpoints and the current attempt's
    pending one (still sending); older ones and dead pending ones (an earlier attempt's: never committed) go, and
    with them every blob no kept checkpoint names (each blob row's delete takes its stored bytes on commit)."""
    rows = list(Checkpoint.objects.filter(job=job).values_list("pk", "seq", "state", "attempt_id"))
    committed = [seq for _, seq, state, _ in rows if state == CheckpointState.COMMITTED]
    gone_seqs = set(rules.to_delete(committed, keep_last=keep_last))
    live_attempt = current_attempt.pk if current_attempt is not None else None
    gone = [pk for pk, seq, state, att in rows
            if seq in gone_seqs or (state == CheckpointState.PENDING and att != live_attempt)]  # fmt: skip
    Checkpoint.objects.filter(pk__in=gone).delete()
    kept = list(Checkpoint.objects.filter(job=job).values_list("files", flat=True))
    blobs = dict(CheckpointBlob.objects.filter(job=job).values_list("pk", "sha256"))
    for blob in CheckpointBlob.objects.filter(pk__in=rules.unreferenced(blobs, kept)):
        blob.delete()  # one by one: each sends the signal that removes its stored bytes on commit
