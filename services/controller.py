"""The services controller's shell: read each service and its replicas, ask services.control what to do, do it.

One pass (services.tasks.reconcile_services, every EULER_SERVICE_TICK) walks every service. Each action is one
short transaction on the replica's row; the next pass sees the result, so a pass cut short (a time limit, a
crash) leaves nothing half done that the next one does not finish.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from agents.models import Agent, AgentInstance, Health
from euler.errors import EulerError
from jobs import services as job_services
from jobs import validation as jobs_validation
from jobs.models import Job
from jobs.states import TERMINAL, AttemptState, JobState
from services import control, rotation, scaling
from services.models import LIVE, Replica, ReplicaState, Service, ServiceRevision
from services.writes import event

log = logging.getLogger(__name__)
REPLICA_TIMEOUT = jobs_validation.MAX_TIMEOUT  # a replica's job runs under the longest job timeout, then is replaced


def timing() -> control.Timing:
    return control.Timing(
        drain_seconds=settings.EULER_SERVICE_DRAIN_SECONDS, ready_timeout=settings.EULER_SERVICE_READY_TIMEOUT
    )


def run_pass(now: datetime | None = None) -> int:
    """Reconcile every service; returns how many actions were applied."""
    done = 0
    for service_id in list(Service.objects.order_by("pk").values_list("pk", flat=True)):
        try:
            done += reconcile_service(service_id, now=now)
        except Exception:  # noqa: BLE001 - one service's trouble never stops the others'
            log.exception("service %s: reconcile failed", service_id)
    return done


def _views(service: Service, now: datetime) -> tuple[list[control.ReplicaView], dict[int, dict]]:
    since = now - timedelta(seconds=settings.EULER_SERVICE_READY_TIMEOUT)
    rows = list(Replica.objects.filter(Q(service=service) & (~Q(state=ReplicaState.ENDED) | Q(ended_at__gte=since))))
    jobs = {
        j["pk"]: j
        for j in Job.objects.filter(pk__in=[r.job_id for r in rows if r.job_id]).values(
            "pk",
            "state",
            "current_attempt_id",
            "current_attempt__state",
            "current_attempt__container_id",
            "current_attempt__node_name",
        )
    }
    health = {
        i["pk"]: i
        for i in AgentInstance.objects.filter(pk__in=[r.instance_id for r in rows if r.instance_id]).values(
            "pk", "health", "consecutive_failures"
        )
    }
    views, facts = [], {}
    for r in rows:
        job = jobs.get(r.job_id) if r.job_id else None
        inst = health.get(r.instance_id) if r.instance_id else None
        running = (
            job["current_attempt_id"]
            if job and job["state"] == JobState.RUNNING and job["current_attempt__state"] == AttemptState.RUNNING
            else None
        )
        facts[r.pk] = {"row": r, "job": job}
        views.append(
            control.ReplicaView(
                id=r.pk,
                revision=r.revision,
                state=r.state,
                created_at=r.created_at.timestamp(),
                job_ended=r.state != ReplicaState.ENDED and (job is None or job["state"] in TERMINAL),
                running_attempt=running,
                healthy=bool(inst and inst["health"] == Health.HEALTHY),
                failures=inst["consecutive_failures"] if inst else 0,
                ever_ready=r.ready_at is not None,
                drain_started_at=r.drain_started_at.timestamp() if r.drain_started_at else None,
                ended_at=r.ended_at.timestamp() if r.ended_at else None,
            )
        )
    return views, facts


def reconcile_service(service_id: int, *, now: datetime | None = None) -> int:
    now = now or timezone.now()
    service = Service.objects.select_related("project").filter(pk=service_id).first()
    if service is None:
        return 0
    views, facts = _views(service, now)
    if not service.deleting:
        scaling.apply(service, now)
    view = control.ServiceView(
        replicas=service.replicas,
        revision=service.revision,
        stable_revision=service.stable_revision,
        probe_failures=int(service.probe.get("failures", 3)),
        deleting=service.deleting,
    )
    actions = control.reconcile(view, views, now.timestamp(), timing())
    for action in actions:
        try:
            _apply(service, action, facts, now)
        except EulerError as exc:
            _blocked(service, exc.message)
    return len(actions)


def _blocked(service: Service, message: str) -> None:
    if service.message != message:
        Service.objects.filter(pk=service.pk).update(message=message[:1000])
        event(service, "blocked", message)
        service.message = message


def _apply(service: Service, action, facts: dict, now: datetime) -> None:
    if isinstance(action, control.Start):
        _start(service, action.revision)
    elif isinstance(action, control.Probe):
        _probe(service, facts[action.replica], action.attempt, now)
    elif isinstance(action, control.Ready):
        _move(action.replica, ReplicaState.PROBING, ReplicaState.READY, ready_at=now)
    elif isinstance(action, control.Drain):
        _drain(service, facts[action.replica]["row"], action.reason, now)
    elif isinstance(action, control.Stop):
        _stop(service, facts[action.replica]["row"])
    elif isinstance(action, control.End):
        _end(service, facts[action.replica], action.reason, now)
    elif isinstance(action, control.Rollback):
        Service.objects.filter(pk=service.pk).update(revision=action.to_revision, rollout="rolled_back", message="")
        event(service, "rolled_back", f"back to revision {action.to_revision}: {action.reason}")
    elif isinstance(action, control.Promote):
        Service.objects.filter(pk=service.pk).update(stable_revision=action.revision, rollout="", message="")
        if service.stable_revision is not None:
            event(service, "rolled_out", f"revision {action.revision} serves on every replica")
        service.stable_revision = action.revision
    elif isinstance(action, control.Finish):
        with transaction.atomic():
            Agent.objects.filter(pk=service.agent_id, service_managed=True).delete()
            service.delete()


def _start(service: Service, revision: int) -> None:
    rev = ServiceRevision.objects.get(service=service, number=revision)
    with transaction.atomic():
        replica = Replica.objects.create(service=service, revision=revision)
        spec = {
            **rev.spec,
            "name": f"{service.name}-{replica.pk}"[:100],
            "command": list(rev.spec["command"]),
            "env": dict(rev.env or {}),
            "timeout_seconds": REPLICA_TIMEOUT,
            "max_retries": 0,
            "service_port": service.port,
            "spread_group": f"service:{service.pk}",
        }
        job = job_services.job_submit(project=service.project, spec=spec)
        Replica.objects.filter(pk=replica.pk).update(job=job)
    if service.message:
        Service.objects.filter(pk=service.pk).update(message="")
        service.message = ""


def _probe(service: Service, fact: dict, attempt_id: int, now: datetime) -> None:
    """The replica runs: its instance enters the agent, not routable (unhealthy) until the probe passes twice."""
    job = fact["job"]
    url = rotation.address(attempt_id, service.port, job["current_attempt__container_id"] or "")
    if url is None:
        return
    with transaction.atomic():
        row = Replica.objects.select_for_update().filter(pk=fact["row"].pk, state=ReplicaState.PENDING).first()
        if row is None:
            return
        instance = AgentInstance.objects.create(agent_id=service.agent_id, base_url=url, health=Health.UNHEALTHY)
        Replica.objects.filter(pk=row.pk).update(
            state=ReplicaState.PROBING,
            instance=instance,
            attempt_id=attempt_id,
            node_name=job["current_attempt__node_name"] or "",
        )


def _move(replica_id: int, before: str, after: str, **fields) -> bool:
    return bool(Replica.objects.filter(pk=replica_id, state=before).update(state=after, **fields))


def _drain(service: Service, row: Replica, reason: str, now: datetime) -> None:
    """Out of the rotation first: the instance is disabled (every web process's route drops it within its cache
    time), calls in flight finish; the job is cancelled only after EULER_SERVICE_DRAIN_SECONDS."""
    with transaction.atomic():
        if not Replica.objects.filter(pk=row.pk, state__in=LIVE).update(
            state=ReplicaState.DRAINING, drain_started_at=now, reason=reason
        ):
            return
        if row.instance_id:
            AgentInstance.objects.filter(pk=row.instance_id).update(enabled=False)
    if reason in ("probe_failed", "not_ready"):
        event(service, "replaced", f"replica {row.pk}: {reason.replace('_', ' ')}")
    elif reason == "scaled_down":
        event(service, "scaled_down", f"replica {row.pk} drained")


def _stop(service: Service, row: Replica) -> None:
    with transaction.atomic():
        if not _move(row.pk, ReplicaState.DRAINING, ReplicaState.STOPPING):
            return
        if row.job_id:
            job = Job.objects.filter(pk=row.job_id).values_list("state", flat=True).first()
            if job is not None and job not in TERMINAL:
                job_services.job_cancel(job_id=row.job_id, project=service.project_id)


def _end(service: Service, fact: dict, reason: str, now: datetime) -> None:
    row, job = fact["row"], fact["job"]
    with transaction.atomic():
        if (
            not Replica.objects.filter(pk=row.pk)
            .exclude(state=ReplicaState.ENDED)
            .update(state=ReplicaState.ENDED, ended_at=now, reason=row.reason or reason)
        ):
            return
        if row.instance_id:
            AgentInstance.objects.filter(pk=row.instance_id).delete()
    if reason == "job_ended":
        why = f"its job ended {job['state']}" if job else "its job is gone"
        event(service, "replica_failed", f"replica {row.pk}: {why}; replacing it")
