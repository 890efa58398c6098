"""The services controller's decisions (pure): what to do with a service's replicas now.

`reconcile(service, replicas, now, timing)` reads plain snapshots and returns actions; the shell
(services/controller.py) applies them, each in its own short transaction, and the next pass sees the result.
Nothing here reads the clock, the database or Django.

A replica moves pending → probing → ready → draining → stopping → ended (models.ReplicaState):
- pending: its job is queued or starting; once the job runs, its instance is created (not yet routable);
- probing: the health checker probes it through the same path as traffic; two passes and it is ready;
- ready: in the gateway's rotation. `failures` probe failures in a row and it is replaced;
- draining: out of the rotation (new calls go elsewhere, calls in flight finish) for `drain_seconds`;
- stopping: its job is cancelled (SIGTERM, grace, SIGKILL on the node); ended when the job has ended.
A replica whose job ends on its own (lost node, crash, timeout) is ended and replaced.

Rolling update: a new revision replaces the replicas one at a time with a surge of one: a new replica is
started, and one old replica is drained only once a new one is ready. A new replica that is not ready within
`ready_timeout`, or FAILURES_TO_ROLLBACK of them that end before ever being ready, roll the service back to its
last stable revision (every replica was ready on it), which then replaces them the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

PENDING, PROBING, READY, DRAINING, STOPPING, ENDED = "pending", "probing", "ready", "draining", "stopping", "ended"
LIVE = (PENDING, PROBING, READY)
FAILURES_TO_ROLLBACK = 3
BACKOFF_BASE = 5.0  # seconds before a crash-looping service (no stable revision) starts the next replica
BACKOFF_MAX = 300.0


@dataclass(frozen=True)
class ReplicaView:
    id: int
    revision: int
    state: str
    created_at: float
    job_ended: bool = False  # its job reached an end (or is gone)
    running_attempt: int | None = None  # the job's attempt while it runs
    healthy: bool = False  # its instance passed the readiness probe
    failures: int = 0  # consecutive probe failures of its instance
    ever_ready: bool = False
    drain_started_at: float | None = None
    ended_at: float | None = None


@dataclass(frozen=True)
class ServiceView:
    replicas: int  # how many to keep now
    revision: int  # the revision to run
    stable_revision: int | None = None  # the last revision that was fully ready
    probe_failures: int = 3
    deleting: bool = False


@dataclass(frozen=True)
class Timing:
    drain_seconds: float = 20.0
    ready_timeout: float = 600.0


# --- actions ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Start:
    revision: int


@dataclass(frozen=True)
class Probe:
    replica: int
    attempt: int


@dataclass(frozen=True)
class Ready:
    replica: int


@dataclass(frozen=True)
class Drain:
    replica: int
    reason: str


@dataclass(frozen=True)
class Stop:
    replica: int


@dataclass(frozen=True)
class End:
    replica: int
    reason: str


@dataclass(frozen=True)
class Rollback:
    to_revision: int
    reason: str


@dataclass(frozen=True)
class Promote:
    revision: int


@dataclass(frozen=True)
class Finish:
    """A deleted service whose replicas have all ended: remove it."""


Action = Start | Probe | Ready | Drain | Stop | End | Rollback | Promote | Finish


def _crash_backoff(failures: int) -> float:
    return min(BACKOFF_MAX, BACKOFF_BASE * 2 ** max(0, failures - 1))


def reconcile(service: ServiceView, replicas: list[ReplicaView], now: float, timing: Timing) -> list[Action]:
    actions: list[Action] = []
    live: list[ReplicaView] = []  # live after this pass's own moves
    ready_ids: set[int] = set()
    not_ready_late: list[ReplicaView] = []
    for r in sorted(replicas, key=lambda r: r.id):
        if r.state == ENDED:
            continue
        if r.job_ended:
            actions.append(End(r.id, "stopped" if r.state in (DRAINING, STOPPING) else "job_ended"))
            continue
        if r.state == STOPPING:
            continue
        if r.state == DRAINING:
            if r.drain_started_at is None or now - r.drain_started_at >= timing.drain_seconds:
                actions.append(Stop(r.id))
            continue
        if r.state == READY and r.failures >= service.probe_failures:
            actions.append(Drain(r.id, "probe_failed"))
            continue
        if r.state == PENDING and r.running_attempt is not None:
            actions.append(Probe(r.id, r.running_attempt))
        elif r.state == PROBING and r.healthy:
            actions.append(Ready(r.id))
            ready_ids.add(r.id)
        elif r.state == READY:
            ready_ids.add(r.id)
        if r.id not in ready_ids and now - r.created_at >= timing.ready_timeout:
            not_ready_late.append(r)
        live.append(r)

    if service.deleting:
        actions = [a for a in actions if not isinstance(a, Probe | Ready)]
        actions += [Drain(r.id, "deleted") for r in live]
        if all(r.state == ENDED for r in replicas):
            actions.append(Finish())
        return actions

    target = service.revision
    # Rollback: the new revision never gets ready.
    failed_new = [
        r for r in replicas if r.revision == target and not r.ever_ready and (r.state == ENDED or r.job_ended)
    ]
    recent_failed = [r for r in failed_new if r.ended_at is None or now - r.ended_at < timing.ready_timeout]
    late_new = [r for r in not_ready_late if r.revision == target]
    can_roll_back = service.stable_revision is not None and service.stable_revision != target
    if can_roll_back and (late_new or len(recent_failed) >= FAILURES_TO_ROLLBACK):
        why = (
            f"replica {late_new[0].id} of revision {target} was not ready within {timing.ready_timeout:g} s"
            if late_new
            else f"{len(recent_failed)} replicas of revision {target} ended before they were ready"
        )
        actions.append(Rollback(service.stable_revision, why))
        target = service.stable_revision
    else:
        # Not ready in time, nothing to roll back to: replace it.
        for r in late_new:
            actions.append(Drain(r.id, "not_ready"))
            live.remove(r)

    new = [r for r in live if r.revision == target]
    old = [r for r in live if r.revision != target]
    new_ready = [r for r in new if r.id in ready_ids]
    new_waiting = [r for r in new if r.id not in ready_ids]
    desired = max(0, service.replicas)

    def not_ready_first(rows: list[ReplicaView], newest: bool) -> list[ReplicaView]:
        return sorted(rows, key=lambda r: (r.id in ready_ids, -r.id if newest else r.id))

    starts = 0
    if not old:
        if len(new) > desired:
            for r in not_ready_first(new, newest=True)[: len(new) - desired]:
                actions.append(Drain(r.id, "scaled_down"))
        else:
            starts = desired - len(new)
        if len(new) >= desired and len(new_ready) >= desired and service.stable_revision != target:
            if desired > 0 or not new:
                actions.append(Promote(target))
    else:
        # Rolling: old replicas go as new ones get ready, never below `desired` ready ones while the new ones start.
        extra = len(new_ready) + len(old) - desired
        for r in not_ready_first(old, newest=False)[: max(0, min(len(old), extra))]:
            actions.append(Drain(r.id, "rolled_out"))
        remaining = len(live) - max(0, min(len(old), extra))
        starts = max(0, desired - remaining)  # replace what failed at once
        if not starts and not new_waiting and len(new) < desired and remaining < desired + 1:
            starts = 1  # the surge: one new replica at a time, once the previous one is ready

    if starts and recent_failed and service.stable_revision is None:
        last = max((r.ended_at or 0.0) for r in recent_failed)
        if now - last < _crash_backoff(len(recent_failed)):
            starts = 0  # crash-looping with nothing to roll back to: back off
    actions += [Start(target)] * starts
    return actions
