"""Job and attempt states and the one table of allowed job moves; state sets are named here once."""

from __future__ import annotations

from django.db import models


class JobState(models.TextChoices):
    WAITING = "waiting", "Waiting"  # not a candidate: unmet dependencies, or its array's parallelism is full
    QUEUED = "queued", "Queued"
    ASSIGNED = "assigned", "Assigned"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"
    LOST = "lost", "Lost"


class AttemptState(models.TextChoices):
    ASSIGNED = "assigned", "Assigned"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"
    LOST = "lost", "Lost"
    # Stopped by Euler or the node's lender and requeued without spending the job's retry budget (jobs/stopping.py).
    RECLAIMED = "reclaimed", "Reclaimed by its lender"
    PREEMPTED = "preempted", "Preempted"


class Pool(models.TextChoices):
    ANY = "any", "Platform, public pool and own nodes"
    OWN = "own", "The project's own nodes only"


class Network(models.TextChoices):
    DEFAULT = "default", "The node's egress policy (the internet; no host, private or metadata addresses)"
    NONE = "none", "No network: loopback only"


class Isolation(models.TextChoices):
    DEFAULT = "default", "What the node's trust level (or its lender) requires: runc or a sandbox"
    SANDBOX = "sandbox", "A sandboxed runtime (gVisor's runsc) on every node"


class MinTrust(models.TextChoices):
    COMMUNITY = "community", "Community"
    PLATFORM = "platform", "Platform"


class RetryOn(models.TextChoices):
    LOST = "lost", "Lost"
    FAILED = "failed", "Failed"
    TIMEOUT = "timeout", "Timeout"


TERMINAL = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.LOST})
ACTIVE = frozenset({JobState.ASSIGNED, JobState.RUNNING})  # a job holding an attempt on a node
IN_SLOT = frozenset({JobState.QUEUED, JobState.ASSIGNED, JobState.RUNNING})  # counts against array parallelism
ATTEMPT_ACTIVE = frozenset({AttemptState.ASSIGNED, AttemptState.RUNNING})  # holds node resources
ATTEMPT_ENDED = frozenset(
    {
        AttemptState.SUCCEEDED,
        AttemptState.FAILED,
        AttemptState.CANCELLED,
        AttemptState.LOST,
        AttemptState.RECLAIMED,
        AttemptState.PREEMPTED,
    }
)

# The allowed moves. `queued` after an active state is an automatic retry; after a terminal one, a
# manual retry (`waiting` for an array task whose array runs its parallelism already). `waiting` → `queued`
# releases a job whose dependencies are met or whose array has room. Nothing else moves a job.
ALLOWED: dict[str, frozenset[str]] = {
    JobState.WAITING: frozenset({JobState.QUEUED, JobState.CANCELLED}),
    JobState.QUEUED: frozenset({JobState.ASSIGNED, JobState.CANCELLED}),
    JobState.ASSIGNED: frozenset(
        {JobState.RUNNING, JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.LOST, JobState.QUEUED}
    ),
    JobState.RUNNING: frozenset(
        {JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.LOST, JobState.QUEUED}
    ),
    JobState.SUCCEEDED: frozenset({JobState.QUEUED, JobState.WAITING}),
    JobState.FAILED: frozenset({JobState.QUEUED, JobState.WAITING}),
    JobState.CANCELLED: frozenset({JobState.QUEUED, JobState.WAITING}),
    JobState.LOST: frozenset({JobState.QUEUED, JobState.WAITING}),
}


def allowed(source: str, target: str) -> bool:
    return target in ALLOWED.get(source, frozenset())


# Protocol exit reasons that count as a plain failure for the retry policy.
FAILURE_REASONS = frozenset({"exited", "oom", "image_pull_failed", "start_failed", "disk_limit"})


def attempt_outcome(*, reason: str | None, exit_code: int | None) -> str:
    """The attempt state for an `ended` report."""
    if reason in (None, "exited"):
        return AttemptState.SUCCEEDED if exit_code == 0 else AttemptState.FAILED
    if reason == "cancelled":
        return AttemptState.CANCELLED
    if reason in ("lost", "gpu_error"):  # gpu_error: the node's GPU failed under it, not the job (retry_on: lost)
        return AttemptState.LOST
    return AttemptState.FAILED


def retry_category(*, attempt_state: str, reason: str | None) -> str | None:
    """Which `retry_on` entry an ended attempt falls under (None: never retried)."""
    if attempt_state == AttemptState.LOST:
        return RetryOn.LOST
    if attempt_state == AttemptState.FAILED:
        return RetryOn.TIMEOUT if reason == "timeout" else RetryOn.FAILED
    return None


def retry_delay(*, retries_used: int, base: float, cap: float) -> float:
    """Exponential backoff before automatic retry number `retries_used + 1`."""
    return min(cap, base * (2 ** min(retries_used, 30)))
