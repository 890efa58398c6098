"""Fencing: a node may only report on the current attempt of a job, placed on that very node."""

from __future__ import annotations

from euler.errors import Conflict
from jobs.models import Attempt


class StaleAttempt(Conflict):
    code = "stale_attempt"
    message = "This attempt is no longer current; stop its container."

    def __init__(self, message: str | None = None):
        super().__init__(message, extra={"accepted": False, "stop": True})


def current_attempt(*, node, attempt_id: int) -> Attempt:
    """The attempt, if it is its job's current one and runs on `node`; else 409 `stale_attempt` (reply says stop)."""
    attempt = Attempt.objects.select_related("job").defer("job__env").filter(pk=attempt_id).first()
    if attempt is None or attempt.node_id != node.pk or attempt.job.current_attempt_id != attempt.pk:
        raise StaleAttempt()
    return attempt
