"""Writes of outputs: planning a node's manifest, taking its chunks, checking a bucket upload, and noting on the job
every file that was not kept (never a silent drop). A submission's inputs are checked in jobs.outputs.inputs.

Every node route passes jobs.fencing (Right.OUTPUTS: only while the attempt is active, so not after its `ended`
report) under a lock that whoever ends the attempt takes too; the deadline backstop moves only on progress
(keepalive.py). No stored bytes are written under the job and quota locks: an empty file needs none."""

from __future__ import annotations

import hashlib
import uuid

from django.db import transaction
from django.utils import timezone

from euler.errors import EulerError, InvalidInput, NotFound
from jobs import fencing
from jobs.models import Attempt, Job, JobEvent
from jobs.outputs import chunks, keepalive, rules, selectors, store
from jobs.outputs.models import OutputFile
from nodeagent import protocol

EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
LISTED_IN_EVENT = 5  # refused files named in one event message; the rest are counted


class ChunkTooLarge(EulerError):
    code = "output_chunk_too_large"
    status_code = 413


# --- events ----------------------------------------------------------------------------------------------------
def note_truncated(*, job: Job, attempt: Attempt | None, why: str, message: str) -> None:
    """Mark the job's outputs truncated and say why in its event log."""
    message = message[:1000]
    Job.objects.filter(pk=job.pk).update(outputs_truncated=True)
    Job.objects.filter(pk=job.pk, outputs_reason="").update(outputs_reason=message[:500])
    JobEvent.objects.create(job=job, attempt=attempt, from_state=job.state, to_state=job.state, reason=why[:32],
                            message=message)  # fmt: skip


def _describe(skips: list[protocol.OutputSkip], total: int) -> str:
    named = "; ".join(f"{s.path} ({s.reason}{': ' + s.message if s.message else ''})" for s in skips[:LISTED_IN_EVENT])
    more = total - min(len(skips), LISTED_IN_EVENT)
    return f"{total} output file(s) not kept: {named}" + (f"; and {more} more" if more > 0 else "")


def note_report(*, job: Job, attempt: Attempt, report: protocol.AttemptReport) -> None:
    """The agent's last word on the outputs (the `ended` report, sent after every upload): a failed collection or
    upload is noted, and files it never finished are dropped (so they no longer count against the quota)."""
    # Files exist only for declared outputs: plan_manifest refuses a job without any (no_outputs_declared).
    unfinished = (
        list(OutputFile.objects.filter(attempt=attempt, complete=False).values_list("path", flat=True))
        if job.outputs
        else []
    )
    if unfinished:
        OutputFile.objects.filter(attempt=attempt, complete=False).delete()
        named = ", ".join(unfinished[:LISTED_IN_EVENT]) + (f" and {len(unfinished) - LISTED_IN_EVENT} more"
                                                           if len(unfinished) > LISTED_IN_EVENT else "")  # fmt: skip
        note_truncated(job=job, attempt=attempt, why="outputs_incomplete",
                       message=f"{len(unfinished)} output file(s) were not uploaded in full: {named}")  # fmt: skip
    if not report.outputs and job.outputs and report.exit_code is not None:
        # The container ran and exited, yet the node's last word names no outputs (a modified agent, or one that
        # lost the attempt's record): say so on the job rather than let it end as though it had none to store.
        note_truncated(job=job, attempt=attempt, why="outputs_not_reported",
                       message="the node's end report said nothing of the declared outputs: none were collected")  # fmt: skip
    if report.outputs == "failed":
        note_truncated(job=job, attempt=attempt, why="outputs_failed",
                       message=f"outputs were not stored: {report.outputs_message or 'the upload failed'}")  # fmt: skip
    elif report.outputs == "truncated" and report.outputs_message:
        JobEvent.objects.create(job=job, attempt=attempt, from_state=job.state, to_state=job.state,
                                reason="outputs_truncated", message=report.outputs_message[:1000])  # fmt: skip
        Job.objects.filter(pk=job.pk).update(outputs_truncated=True)


# --- the manifest's plan -------------------------------------------------------------------------------------------
def _quota_left(job: Job, attempt: Attempt) -> int:
    from quotas.models import Quota

    # The quota row, locked: two attempts of one project plan one after the other, so both cannot take the rest.
    limit = Quota.objects.select_for_update().filter(project_id=job.project_id).values_list("output_bytes", flat=True)
    limit = limit.first()
    if limit is None:
        return 0
    return max(0, limit - selectors.charged_bytes(project_id=job.project_id, besides=attempt))


def _outputs_of(node, attempt_id: int, *, lock: fencing.Lock) -> Attempt:
    return fencing.attempt_for(node=node, attempt_id=attempt_id, right=fencing.Right.OUTPUTS, lock=lock)


def _upload(row: OutputFile) -> protocol.OutputUpload:
    if store.is_bucket():
        url, headers = store.presigned_put(row.storage_key, sha256=row.sha256, size=row.size)
        return protocol.OutputUpload(file_id=row.pk, path=row.path, method="put", url=url, headers=headers)
    return protocol.OutputUpload(file_id=row.pk, path=row.path, method="chunks", offset=row.received)


def _new_row(job: Job, attempt: Attempt, f: protocol.OutputFile, now) -> OutputFile:
    """An unsaved row for a newly accepted file. An empty file is complete at once: it has no bytes to send and
    none to store (every reader serves size 0 without the store), so nothing is written under the locks."""
    key = f"jobs/{job.pk}/{attempt.pk}/{uuid.uuid4().hex}"
    row = OutputFile(job=job, attempt=attempt, project_id=job.project_id, path=f.path, size=f.size, sha256=f.sha256,
                     storage_key=key)  # fmt: skip
    if f.size == 0 and f.sha256 == EMPTY_SHA256:
        row.complete, row.received, row.completed_at = True, 0, now
    return row


@transaction.atomic
def plan_manifest(*, node, attempt_id: int, manifest: protocol.OutputManifest) -> protocol.OutputsPlan:
    """Which of the manifest's files the server takes, and how each is sent. Idempotent per attempt: a second
    manifest (the agent restarted) keeps the files already held and the offsets reached. An earlier attempt's
    files are replaced by this one's. Names outside the job's declared paths are refused (rules.plan)."""
    attempt = _outputs_of(node, attempt_id, lock=fencing.Lock.JOB)
    job = attempt.job
    if not job.outputs:
        raise InvalidInput("This job declared no outputs.", code="no_outputs_declared")
    OutputFile.objects.filter(job=job).exclude(attempt=attempt).delete()  # each row's file goes on commit
    decision = rules.plan(list(manifest.files), declared=job.outputs["paths"], job_cap=job.outputs["max_bytes"],
                          quota_left=_quota_left(job, attempt))  # fmt: skip
    wanted = {f.path: f for f in decision.accepted}
    held = {row.path: row for row in OutputFile.objects.filter(attempt=attempt)}
    stale = [row.pk for path, row in held.items() if (row.size, row.sha256) != _facts(wanted.get(path))]
    OutputFile.objects.filter(pk__in=stale).delete()  # no longer in the manifest, or another file now
    held = {path: row for path, row in held.items() if row.pk not in set(stale)}
    now = timezone.now()
    fresh = [_new_row(job, attempt, f, now) for f in decision.accepted if f.path not in held]
    held.update((row.path, row) for row in OutputFile.objects.bulk_create(fresh, batch_size=1000))
    if any(row.complete for row in fresh):
        keepalive.on_progress(attempt=attempt, now=now)  # files newly complete (empty ones)
    uploads = [_upload(held[f.path]) for f in decision.accepted if not held[f.path].complete]
    skipped = [*manifest.skipped, *decision.refused]
    total = manifest.skipped_total + len(decision.refused) if manifest.skipped_total else len(skipped)
    if manifest.error:
        note_truncated(
            job=job, attempt=attempt, why="outputs_failed", message=f"collecting outputs failed: {manifest.error}"
        )
    if skipped:
        note_truncated(job=job, attempt=attempt, why=_why(skipped), message=_describe(skipped, total))
    return protocol.OutputsPlan(uploads=uploads, refused=list(decision.refused))


def _facts(f: protocol.OutputFile | None) -> tuple[int, str] | None:
    return None if f is None else (f.size, f.sha256)


def _why(skips: list[protocol.OutputSkip]) -> str:
    reasons = {s.reason for s in skips}
    return f"outputs_{reasons.pop()}"[:32] if len(reasons) == 1 else "outputs_truncated"


# --- chunks (the filesystem store) ---------------------------------------------------------------------------------
def _row(attempt: Attempt, file_id: int) -> OutputFile:
    row = OutputFile.objects.select_for_update().filter(pk=file_id, attempt=attempt).first()
    if row is None:
        raise NotFound("This attempt has no such output file.", code="no_such_output")
    return row


def file_state(*, node, attempt_id: int, file_id: int) -> protocol.OutputFileReply:
    attempt = _outputs_of(node, attempt_id, lock=fencing.Lock.NONE)  # a read: where to resume
    row = OutputFile.objects.filter(pk=file_id, attempt=attempt).first()
    if row is None:
        raise NotFound("This attempt has no such output file.", code="no_such_output")
    return protocol.OutputFileReply(offset=row.size if row.complete else row.received, complete=row.complete)


def receive_chunk(*, node, attempt_id: int, file_id: int, content_range: str | None, data: bytes):
    """Append one chunk at the offset the server holds (else 409 with that offset); the last one is checked
    against the manifest's sha256 (a mismatch: 400 `sha256_mismatch`, the file starts again at 0: committed)."""
    reply = _receive(node=node, attempt_id=attempt_id, file_id=file_id, content_range=content_range, data=data)
    if reply is None:
        raise _Mismatch()
    return reply


@transaction.atomic
def _receive(*, node, attempt_id: int, file_id: int, content_range: str | None, data: bytes):
    attempt = _outputs_of(node, attempt_id, lock=fencing.Lock.ATTEMPT)  # the bytes land before any `ended`
    row = _row(attempt, file_id)
    took = chunks.take(row, content_range=content_range, data=data, stored="outputs", noun="file")
    if took is chunks.Took.HELD:
        return protocol.OutputFileReply(offset=row.size, complete=True)  # held already: not progress
    if took is chunks.Took.MISMATCH:
        OutputFile.objects.filter(pk=row.pk).update(received=0)
        return None
    if row.complete:
        row.completed_at = timezone.now()
    row.save(update_fields=["received", "complete", "completed_at"])
    keepalive.on_progress(attempt=attempt)  # a larger offset, or a file newly complete
    return protocol.OutputFileReply(offset=row.received, complete=row.complete)


class _Mismatch(InvalidInput):
    code = "sha256_mismatch"
    message = "The file's bytes do not match the manifest's sha256: send it again from offset 0."

    def __init__(self):
        super().__init__(extra={"offset": 0})


@transaction.atomic
def upload_done(*, node, attempt_id: int, file_id: int) -> protocol.OutputFileReply:
    """A presigned PUT finished: check the object (size, sha256) and mark the file complete."""
    attempt = _outputs_of(node, attempt_id, lock=fencing.Lock.ATTEMPT)
    row = _row(attempt, file_id)
    if row.complete or not store.is_bucket():
        return protocol.OutputFileReply(offset=row.size if row.complete else row.received, complete=row.complete)
    why = store.bucket_check(row.storage_key, size=row.size, sha256=row.sha256)
    if why:
        raise InvalidInput(f"The upload is not the file the manifest described: {why}.", code="sha256_mismatch",
                           extra={"offset": 0})  # fmt: skip
    row.received, row.complete, row.completed_at = row.size, True, timezone.now()
    row.save(update_fields=["received", "complete", "completed_at"])
    keepalive.on_progress(attempt=attempt)  # a file newly complete
    return protocol.OutputFileReply(offset=row.size, complete=True)
