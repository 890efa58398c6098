"""Log readers: `GET /api/v1/jobs/{id}/logs` (text/plain, `?attempt=N`, `?follow=1`) and the selectors behind it.

A plain async Django view rather than DRF: `?follow=1` streams through an async iterator (a sync one
would be buffered whole), until the attempt ends.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import NamedTuple

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.views.decorators.http import require_GET

from euler.errors import EulerError, InvalidInput, NotFound, Unauthorized, error_response
from euler.prepared import Prepared
from jobs import logstore
from jobs.models import Attempt, Job
from jobs.states import ATTEMPT_ACTIVE, TERMINAL, JobState
from quotas import scoped
from quotas.access import declare, member

FOLLOW_POLL_SECONDS = 0.25
READ_BATCH = logstore.READ_BATCH


@dataclass(frozen=True)
class Target:
    job_id: int
    attempt_id: int | None
    attempt_number: int | None


class Progress(NamedTuple):
    """Where a job stands, for a log reader that has just subscribed to its moves."""

    state: str
    pending_reason: str
    node: str  # its attempt's node while assigned or running

    def message(self) -> dict:
        """The websocket's `state` message of it: the fields that jobs.broadcast's moves carry, and why it waits."""
        message = {"type": "state", "state": self.state}
        if self.state in (JobState.ASSIGNED, JobState.RUNNING) and self.node:
            message["node"] = self.node
        if self.state == JobState.QUEUED:
            message["pending_reason"] = self.pending_reason
        return message


_PROGRESS = Prepared(
    lambda project_id, job_id: (
        scoped.jobs(project=project_id)
        .filter(pk=job_id)
        .values_list("state", "pending_reason", "current_attempt__node_name")[:1]
    )
)


# --- selectors (sync; shared with the websocket consumer) ---------------------------------------
def project_for_request(request) -> object:
    """The caller's project by `X-Euler-API-Key` or the console session; raises 401/404 like the API."""
    from euler import ratelimit
    from quotas.auth import apikey_authenticate_limited
    from quotas.selectors import credential_of, session_project

    raw = request.META.get("HTTP_X_EULER_API_KEY")
    if raw is not None:
        key = apikey_authenticate_limited(raw=raw, who=ratelimit.client_ip(request))
        if key is None:
            raise Unauthorized("The API key is unknown or revoked.", code="invalid_api_key")
        request._euler_key = key
        request._euler_credential = credential_of(request, key.project)
        return key.project
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        raise Unauthorized("Authentication credentials were not provided.", code="not_authenticated")
    project = session_project(request)
    if project is None:
        raise NotFound("You are not a member of any project.", code="no_project")
    request._euler_credential = credential_of(request, project)
    return project


def parse_attempt(raw: str | None) -> int | None:
    if raw in (None, ""):
        return None
    if not raw.isdigit() or not 1 <= int(raw) <= 1_000_000:
        raise InvalidInput("attempt must be a positive attempt number.", code="invalid_attempt")
    return int(raw)


def log_target(*, project, job_id: int, attempt_number: int | None = None) -> Target:
    """The job (404 when it is another project's) and the attempt to read: `attempt_number`, else the latest."""
    job = scoped.jobs(project=project).filter(pk=job_id).only("pk", "current_attempt_id").first()
    if job is None:
        raise NotFound("No such job.", code="not_found")
    attempts = scoped.attempts(project=project).filter(job_id=job.pk)
    if attempt_number is not None:
        attempt = attempts.filter(number=attempt_number).only("pk", "number").first()
        if attempt is None:
            raise NotFound(f"Job {job_id} has no attempt {attempt_number}.", code="attempt_not_found")
    else:
        attempt = attempts.order_by("-number").only("pk", "number").first()
    if attempt is None:
        return Target(job.pk, None, None)
    return Target(job.pk, attempt.pk, attempt.number)


def job_progress(project_id: int, job_id: int) -> Progress:
    """The project's job's state, pending reason and node (another project's is a 404)."""
    row = _PROGRESS.first(project_id, job_id)
    if row is None:
        raise NotFound("No such job.", code="not_found")
    return Progress(*row)


def chunks_after(attempt_id: int, after_seq: int, limit: int = READ_BATCH) -> list[tuple[int, str, str]]:
    return logstore.chunks_after(attempt_id, after_seq, limit)


def attempt_active(attempt_id: int) -> bool:
    return Attempt.objects.filter(pk=attempt_id, state__in=ATTEMPT_ACTIVE).exists()


def follow_step(attempt_id: int, after_seq: int) -> tuple[list[tuple[int, str, str]], bool]:
    """New chunks and whether more can come; the state is read first, so an ended attempt's read is complete."""
    active = attempt_active(attempt_id)
    rows = chunks_after(attempt_id, after_seq)
    return rows, active or len(rows) == READ_BATCH


def first_attempt_or_end(job_id: int) -> tuple[int | None, bool]:
    """For a follower of a job not placed yet: its latest attempt once there is one, and whether it ended."""
    job = Job.objects.filter(pk=job_id).values("state").first()
    attempt = Attempt.objects.filter(job_id=job_id).order_by("-number").values_list("pk", flat=True).first()
    return attempt, job is None or job["state"] in TERMINAL


def full_text(attempt_id: int) -> str:
    return logstore.full_text(attempt_id)


# --- the view ------------------------------------------------------------------------------------
class _Credential:
    """Re-checks the follower's key or session every RECHECK_SECONDS (one small query), not every poll."""

    def __init__(self, credential: tuple | None):
        self.credential = credential
        self.checked = time.monotonic()

    async def alive(self) -> bool:
        from quotas.selectors import RECHECK_SECONDS, credential_alive

        if self.credential is None or time.monotonic() - self.checked < RECHECK_SECONDS:
            return True
        self.checked = time.monotonic()
        return await sync_to_async(credential_alive)(self.credential)


async def follow(attempt_id: int | None, job_id: int, credential: tuple | None = None):
    """Yields the attempt's log text as it is stored, from the first chunk, until the attempt ends.

    A job that is not placed yet is waited for: its first attempt is followed (or nothing, if it ends first).
    The stream ends early once the credential it was opened with is revoked, signed out or no longer a member.
    """
    still = _Credential(credential)
    while attempt_id is None:
        attempt_id, ended = await sync_to_async(first_attempt_or_end)(job_id)
        if attempt_id is None:
            if ended or not await still.alive():
                return
            await asyncio.sleep(FOLLOW_POLL_SECONDS)
    last = -1
    while True:
        if not await still.alive():
            return
        rows, more = await sync_to_async(follow_step)(attempt_id, last)
        for seq, _stream, data in rows:
            last = seq
            yield data
        if not more:
            return
        if not rows:
            await asyncio.sleep(FOLLOW_POLL_SECONDS)


@declare(get=member())
@require_GET
async def job_logs(request: HttpRequest, job_id: int):
    following = request.GET.get("follow") in ("1", "true")

    def resolve():
        project = project_for_request(request)
        target = log_target(project=project, job_id=job_id, attempt_number=parse_attempt(request.GET.get("attempt")))
        text = None
        if not following and target.attempt_id is not None:
            text = full_text(target.attempt_id)
        return target, text

    try:
        if request.GET.get("follow") not in (None, "", "0", "1", "true", "false"):
            raise InvalidInput("follow is 1 or 0.", code="invalid_follow")
        target, text = await sync_to_async(resolve)()
    except EulerError as exc:
        return error_response(exc)
    headers = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}
    if target.attempt_number is not None:
        headers["X-Euler-Attempt"] = str(target.attempt_number)
    if text is not None:
        return HttpResponse(text, content_type="text/plain; charset=utf-8", headers=headers)
    if target.attempt_id is None and not following:
        return HttpResponse("", content_type="text/plain; charset=utf-8", headers=headers)
    headers["X-Accel-Buffering"] = "no"
    stream = follow(target.attempt_id, target.job_id, getattr(request, "_euler_credential", None))
    return StreamingHttpResponse(stream, content_type="text/plain; charset=utf-8", headers=headers)
