"""Fencing: the one place that decides what a node may do to an attempt, from the attempt's state.

A node acts on an attempt only while the attempt is placed on that node and is its job's current one, and only
while its right lasts:

- report (`running`, `ended`), outputs (manifest, chunk, offset, done) and inputs: while the attempt is active
  (assigned or running). The outputs phase runs between the container's exit and the `ended` report, so it ends
  when that report is accepted (or when the server ended the attempt: lost, the deadline backstop, a stop the node
  obeyed). After that each answers 409 `stale_attempt` and changes nothing: no row, no stored file, no event, no
  deadline move. A duplicate `ended` report is one of these. Checkpoints and the tunnel's streams (SERVE) too.
- logs: also after the end, for the job's current attempt on that node: the agent replays what it buffered while
  the server was unreachable; chunks are stored once per seq and within the attempt's log cap
  (jobs/node_api/logs.py), so a late replay completes the log and cannot grow it past the cap.

`refusal` is the pure decision; `attempt_for` loads (and, for a write, locks) and applies it.
"""

from __future__ import annotations

import enum

from euler.errors import Conflict
from euler.prepared import Prepared
from jobs.models import Attempt, Job
from jobs.states import ATTEMPT_ACTIVE


class StaleAttempt(Conflict):
    code = "stale_attempt"
    message = "This attempt is no longer current; stop its container."

    def __init__(self, message: str | None = None):
        super().__init__(message, extra={"accepted": False, "stop": True})


class Right(enum.StrEnum):
    REPORT = "report"
    OUTPUTS = "outputs"
    INPUTS = "inputs"
    LOGS = "logs"
    CHECKPOINTS = "checkpoints"
    SERVE = "serve"  # carry the gateway's streams to the attempt's container (the node tunnel)


UNTIL_ENDED = frozenset(
    {Right.REPORT, Right.OUTPUTS, Right.INPUTS, Right.CHECKPOINTS, Right.SERVE}
)  # rights that end with the attempt


class Lock(enum.Enum):
    NONE = "none"  # a read (an input's bytes, an upload's offset) or a write that locks on its own (logs)
    ATTEMPT = "attempt"  # the attempt row: the attempt cannot end until the caller commits (chunks, done)
    JOB = "job"  # the job row, then the attempt row (the order every writer keeps): reports, manifests


def refusal(*, right: Right, state: str, on_node: bool, current: bool) -> str | None:
    """Why a node may not use `right` on an attempt (None: it may). Pure."""
    if not on_node or not current:
        return "This attempt is no longer current; stop its container."
    if right in UNTIL_ENDED and state not in ATTEMPT_ACTIVE:
        return f"This attempt has ended ({state}): its node can change nothing of it any more; stop its container."
    return None


# Every report, log batch and output of a node passes here: its reads are compiled once (euler/prepared.py).
_JOB_LOCKED = Prepared(
    lambda pk: Job.objects.select_for_update(of=("self",)).defer("env").filter(attempts__pk=pk).order_by("pk")[:1]
)
_ATTEMPT_LOCKED = Prepared(lambda pk: Attempt.objects.select_for_update(no_key=True).filter(pk=pk).order_by("pk")[:1])
_WITH_JOB = Prepared(
    lambda pk: Attempt.objects.select_related("job").defer("job__env").filter(pk=pk).order_by("pk")[:1]
)
_WITH_JOB_LOCKED = Prepared(
    lambda pk: (
        Attempt.objects.select_related("job")
        .defer("job__env")
        .filter(pk=pk)
        .select_for_update(no_key=True, of=("self",))
        .order_by("pk")[:1]
    )
)


def attempt_for(*, node, attempt_id: int, right: Right, lock: Lock = Lock.NONE) -> Attempt:
    """The attempt, its job loaded (env deferred), if `node` may use `right` on it; else 409 `stale_attempt` (the
    reply says stop). With a lock (inside a transaction) the attempt cannot end between this check and the
    caller's write: whoever ends it (a report, the backstop, a lost node) locks the same rows first."""
    if lock is Lock.JOB:
        job = _JOB_LOCKED.first(attempt_id)
        attempt = _ATTEMPT_LOCKED.first(attempt_id) if job else None
        if attempt is not None:
            attempt.job = job
    else:
        attempt = (_WITH_JOB_LOCKED if lock is Lock.ATTEMPT else _WITH_JOB).first(attempt_id)
    if attempt is None:
        raise StaleAttempt()
    why = refusal(
        right=right,
        state=attempt.state,
        on_node=attempt.node_id == node.pk,
        current=attempt.job.current_attempt_id == attempt.pk,
    )
    if why:
        raise StaleAttempt(why)
    return attempt
