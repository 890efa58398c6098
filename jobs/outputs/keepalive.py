"""The deadline backstop (jobs.attempts.deadlines_expire) waits for outputs while they make progress, up to a cap.

A job that ended near its timeout leaves the agent uploading what it collected; the backstop must not fail it
meanwhile, and must not wait for ever on a node that only pretends to upload. So the deadline moves only on
progress: a chunk that raised the bytes the server holds of a file, or a file newly complete (its last chunk, a
bucket upload's done call, an empty file a manifest listed). A re-posted manifest, a chunk the server already
holds, a done call for a complete file move nothing. Each progress moves the deadline to at least
EULER_JOB_TIMEOUT_GRACE from now, and never past the cap:

    cap = started_at + timeout_seconds + stop grace + EULER_JOB_TIMEOUT_GRACE   (the deadline the `running` report
                                                                                 set: jobs.attempts.backstop_seconds)
          + EULER_JOB_TIMEOUT_GRACE + max_bytes / EULER_OUTPUTS_UPLOAD_RATE   (the upload allowance)

where `max_bytes` is the job's declared output cap (`outputs.max_bytes`). An attempt that never reported `running`
has no upload allowance.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from jobs import stopping
from jobs.models import Attempt
from jobs.states import ATTEMPT_ACTIVE


def upload_allowance(*, max_bytes: int, grace: float, rate: float) -> float:
    """Seconds past the running deadline that uploads of `max_bytes` declared bytes may take at most."""
    return grace + math.ceil(max_bytes / rate)


def moved_deadline(
    *,
    deadline: datetime | None,
    started_at: datetime | None,
    timeout_seconds: int,
    max_bytes: int,
    grace: float,
    rate: float,
    now: datetime,
) -> datetime | None:
    """The deadline after one step of progress, or None when it does not move. Pure."""
    if deadline is None or started_at is None:
        return None
    cap = started_at + timedelta(
        seconds=timeout_seconds + grace + upload_allowance(max_bytes=max_bytes, grace=grace, rate=rate)
    )
    moved = min(cap, now + timedelta(seconds=grace))
    return moved if moved > deadline else None


def on_progress(*, attempt: Attempt, now: datetime | None = None) -> None:
    """The attempt's outputs made progress (the caller holds its row): push its backstop as `moved_deadline` says."""
    job = attempt.job
    moved = moved_deadline(
        deadline=attempt.deadline_at,
        started_at=attempt.started_at,
        # The agent stops a job at its timeout with its grace (jobs/stopping.py): the uploads start after both.
        timeout_seconds=job.timeout_seconds + stopping.clamp_grace(None, job_grace=job.stop_grace_seconds),
        max_bytes=(job.outputs or {}).get("max_bytes", 0),
        grace=settings.EULER_JOB_TIMEOUT_GRACE,
        rate=settings.EULER_OUTPUTS_UPLOAD_RATE,
        now=now or timezone.now(),
    )
    if moved is not None:
        Attempt.objects.filter(pk=attempt.pk, state__in=ATTEMPT_ACTIVE).update(deadline_at=moved)
        attempt.deadline_at = moved
