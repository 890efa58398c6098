"""Writes for services that users ask for: create, change (a new revision rolls out), scale, delete."""

from __future__ import annotations

from django.conf import settings
from django.db import IntegrityError, transaction

import audit
from agents.models import Agent
from agents.services import validate_name
from euler.errors import Conflict, NotFound
from jobs import usage
from quotas import scoped
from services import validation
from services.models import Service, ServiceEvent, ServiceRevision

SCALING_FIELDS = ("replicas", "target_concurrency", "scale_to_zero_after_seconds")


def get_service(*, project, name: str) -> Service:
    return scoped.service(project=project, name=name)


def _agent_fields(probe: dict) -> dict:
    return {
        "health_path": probe["path"],
        "health_interval_s": probe["interval_seconds"],
        "health_timeout_s": probe["timeout_seconds"],
    }


def event(service: Service, kind: str, message: str) -> None:
    ServiceEvent.objects.create(service=service, kind=kind, message=message[:1000])


def service_create(*, project, spec: dict, by=None) -> Service:
    validate_name(spec["name"])
    validation.check_scaling(spec)
    job = validation.job_part(spec)
    usage.check_budget(project=project, gpu_count=job.get("gpu_count", 0))  # an exhausted budget: 429 now
    env = job.pop("env", None) or None
    low, high = spec["replicas"]["min"], spec["replicas"]["max"]
    try:
        with transaction.atomic():
            agent = Agent.objects.create(
                project=project, name=spec["name"], service_managed=True, **_agent_fields(spec["readiness"])
            )
            service = Service.objects.create(
                project=project,
                name=spec["name"],
                agent=agent,
                port=spec["port"],
                min_replicas=low,
                max_replicas=high,
                replicas=max(low, 1),
                target_concurrency=spec["target_concurrency"],
                scale_to_zero_after_seconds=spec.get("scale_to_zero_after_seconds"),
                probe=spec["readiness"],
                revision=1,
            )
            ServiceRevision.objects.create(
                service=service, number=1, spec=job, env=env, spec_hash=validation.spec_hash(job)
            )
            event(service, "created", f"revision 1, {max(low, 1)} replica(s)")
            audit.record(
                "service.created",
                project=project,
                target=f"service:{service.name}",
                details={"image": job["image"], "replicas": spec["replicas"]},
                by=by,
            )
    except IntegrityError:
        raise Conflict(f"A service or agent named {spec['name']!r} already exists.", code="name_taken") from None
    return service


def current_revision(service: Service) -> ServiceRevision:
    return ServiceRevision.objects.get(service=service, number=service.revision)


@transaction.atomic
def service_update(*, service: Service, changes: dict, by=None) -> Service:
    """Apply a validated partial spec. A change of the job part (or any env) makes a new revision, rolled out one
    replica at a time; scaling and probe changes apply in place."""
    service = scoped.services(project=service.project_id).select_for_update().get(pk=service.pk)
    if service.deleting:
        raise NotFound(f"No service named {service.name!r}.")
    current = current_revision(service)
    job_changes = validation.job_part(changes)
    merged = {**current.spec, **{k: v for k, v in job_changes.items() if k != "env"}}
    env = job_changes["env"] or None if "env" in job_changes else current.env
    new_hash = validation.spec_hash(merged)
    fields = []
    if new_hash != current.spec_hash or "env" in job_changes:
        usage.check_budget(project=service.project_id, gpu_count=merged.get("gpu_count", 0))
        number = (ServiceRevision.objects.filter(service=service).order_by("-number").values_list("number", flat=True).first() or 0) + 1  # fmt: skip
        ServiceRevision.objects.create(service=service, number=number, spec=merged, env=env, spec_hash=new_hash)
        service.revision, service.rollout, service.message = number, "rolling", ""
        fields += ["revision", "rollout", "message"]
        event(service, "rollout", f"revision {number}: rolling out")
    scaling = {
        "replicas": changes.get("replicas", {"min": service.min_replicas, "max": service.max_replicas}),
        "scale_to_zero_after_seconds": changes.get("scale_to_zero_after_seconds", service.scale_to_zero_after_seconds),
    }
    if "replicas" in changes or "scale_to_zero_after_seconds" in changes:
        validation.check_scaling(scaling)
        _set_replicas(service, scaling["replicas"])
        service.scale_to_zero_after_seconds = scaling["scale_to_zero_after_seconds"]
        fields += ["min_replicas", "max_replicas", "replicas", "scale_to_zero_after_seconds"]
    if "target_concurrency" in changes:
        service.target_concurrency = changes["target_concurrency"]
        fields.append("target_concurrency")
    if "readiness" in changes:
        service.probe = changes["readiness"]
        fields.append("probe")
        scoped.agents(project=service.project_id).filter(pk=service.agent_id).update(**_agent_fields(service.probe))
    if fields:
        service.save(update_fields=[*set(fields), "updated_at"])
    audit.record(
        "service.changed",
        project=service.project_id,
        target=f"service:{service.name}",
        details={"fields": sorted(set(changes) - {"name"}), "revision": service.revision},
        by=by,
    )
    return service


def _set_replicas(service: Service, replicas: dict) -> None:
    service.min_replicas, service.max_replicas = replicas["min"], replicas["max"]
    service.replicas = min(max(service.replicas, replicas["min"]), replicas["max"])


@transaction.atomic
def service_scale(*, service: Service, replicas: dict, by=None) -> Service:
    """Set the replica range; a fixed count (min == max) is kept at once, a range by the autoscaler within it."""
    service = scoped.services(project=service.project_id).select_for_update().get(pk=service.pk)
    validation.check_scaling({"replicas": replicas, "scale_to_zero_after_seconds": service.scale_to_zero_after_seconds})
    before = service.replicas
    _set_replicas(service, replicas)
    service.save(update_fields=["min_replicas", "max_replicas", "replicas", "updated_at"])
    event(service, "scaled", f"replicas {replicas['min']}..{replicas['max']}: {before} → {service.replicas}")
    audit.record(
        "service.scaled",
        project=service.project_id,
        target=f"service:{service.name}",
        details={"min": replicas["min"], "max": replicas["max"], "replicas": service.replicas},
        by=by,
    )
    return service


@transaction.atomic
def service_delete(*, service: Service, by=None) -> None:
    """The controller drains every replica (out of the rotation first), stops them, then removes the service and
    its agent; the name is free again once it has."""
    updated = scoped.services(project=service.project_id).filter(pk=service.pk, deleting=False).update(deleting=True)
    if not updated:
        raise NotFound(f"No service named {service.name!r}.")
    event(service, "deleted", "deleting: draining every replica")
    audit.record("service.deleted", project=service.project_id, target=f"service:{service.name}", by=by)


def max_replicas() -> int:
    return settings.EULER_SERVICE_MAX_REPLICAS
