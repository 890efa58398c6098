"""Writes for agents: register, update, delete agents and their instances (SSRF-checked)."""

from __future__ import annotations

import re

from django.db import IntegrityError, transaction

import audit
from agents import ssrf
from agents.models import Agent, AgentInstance
from euler.errors import Conflict, InvalidInput
from quotas import scoped

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
HEADER_NAME_RE = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$")
# Headers the gateway sets or strips itself; an agent cannot use them for its credential.
RESERVED_HEADERS = frozenset(
    {
        "host",
        "cookie",
        "x-euler-api-key",
        "x-forwarded-for",
        "x-request-id",
        "content-length",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "te",
        "trailer",
        "upgrade",
        "proxy-authorization",
        "proxy-authenticate",
    }
)
MAX_INSTANCES = 100


def validate_name(name: str) -> str:
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise InvalidInput(
            "An agent name is 1-63 lowercase letters, digits, '-' or '_', starting with a letter or digit.",
            code="invalid_name",
        )
    return name


def validate_base_url(url: str) -> str:
    url = (url or "").strip()
    if len(url) > 2000:
        raise InvalidInput("base_url is at most 2000 characters.", code="invalid_url")
    why = ssrf.check_url(url)
    if why:
        raise InvalidInput(f"base_url refused: {why}.", code="forbidden_address", extra={"reason": why})
    return url.rstrip("/")


def validate_auth_header(name: str, value: str | None) -> None:
    if not name and not value:
        return
    if not name or not HEADER_NAME_RE.match(name) or name.lower() in RESERVED_HEADERS:
        raise InvalidInput(
            "auth_header_name must be a valid header name the gateway does not manage.", code="invalid_header"
        )
    if not value or any(c in value for c in "\r\n\0") or len(value) > 4096:
        raise InvalidInput("auth_header_value is 1-4096 characters without line breaks.", code="invalid_header")


def validate_health_path(path: str) -> str:
    if not isinstance(path, str) or not path.startswith("/") or path.startswith("//") or len(path) > 255:
        raise InvalidInput("health_path is an absolute path like /health.", code="invalid_path")
    if any(c in path for c in "\r\n\0 #"):
        raise InvalidInput("health_path holds characters that are not allowed.", code="invalid_path")
    return path


def get_agent(*, project, name: str) -> Agent:
    return scoped.agent(project=project, name=name)


def _not_managed(agent: Agent) -> None:
    """A service's agent changes only through its service (its instances are its ready replicas)."""
    if agent.service_managed:
        raise Conflict(
            f"Agent {agent.name!r} fronts a service: change it through /api/v1/services/{agent.name}.",
            code="managed_by_service",
        )


def _add_instance(agent: Agent, spec: dict, base_url: str) -> AgentInstance:
    if agent.instances.count() >= MAX_INSTANCES:
        raise InvalidInput(f"An agent has at most {MAX_INSTANCES} instances.", code="too_many_instances")
    return AgentInstance.objects.create(
        agent=agent,
        base_url=base_url,
        weight=spec.get("weight", 1),
        enabled=spec.get("enabled", True),
    )


def agent_create(*, project, fields: dict, instances: list[dict]) -> Agent:
    validate_name(fields["name"])
    validate_health_path(fields.get("health_path", "/health"))
    validate_auth_header(fields.get("auth_header_name", ""), fields.get("auth_header_value"))
    urls = [validate_base_url(spec["base_url"]) for spec in instances]  # refuse before writing anything
    try:
        with transaction.atomic():
            agent = Agent.objects.create(project=project, **fields)
            for spec, url in zip(instances, urls, strict=True):
                _add_instance(agent, spec, url)
            audit.record("agent.created", project=project, target=f"agent:{agent.name}", details={"instances": urls})
    except IntegrityError:
        raise Conflict(f"An agent named {fields['name']!r} already exists.", code="name_taken") from None
    return agent


@transaction.atomic
def agent_update(*, agent: Agent, fields: dict) -> Agent:
    _not_managed(agent)
    if "health_path" in fields:
        validate_health_path(fields["health_path"])
    name = fields.get("auth_header_name", agent.auth_header_name)
    value = fields["auth_header_value"] if "auth_header_value" in fields else agent.auth_header_value
    if "auth_header_name" in fields and not fields["auth_header_name"]:
        value = fields["auth_header_value"] = None
    if "auth_header_value" in fields and not fields["auth_header_value"]:
        name = fields["auth_header_name"] = ""
        value = fields["auth_header_value"] = None
    validate_auth_header(name, value)
    for key, item in fields.items():
        setattr(agent, key, item)
    agent.save()
    audit.record(
        "agent.changed", project=agent.project_id, target=f"agent:{agent.name}", details={"fields": sorted(fields)}
    )
    return agent


@transaction.atomic
def agent_delete(*, agent: Agent) -> None:
    _not_managed(agent)
    agent.delete()
    audit.record("agent.deleted", project=agent.project_id, target=f"agent:{agent.name}")


def instance_add(*, agent: Agent, spec: dict) -> AgentInstance:
    _not_managed(agent)
    url = validate_base_url(spec["base_url"])
    with transaction.atomic():
        scoped.agents(project=agent.project_id).select_for_update().filter(pk=agent.pk).first()
        instance = _add_instance(agent, spec, url)
        audit.record(
            "agent.changed",
            project=agent.project_id,
            target=f"agent:{agent.name}",
            details={"instance_added": instance.pk, "base_url": url},
        )
        return instance


def get_instance(*, agent: Agent, instance_id: int) -> AgentInstance:
    return scoped.instance(agent=agent, instance_id=instance_id)


@transaction.atomic
def instance_update(*, instance: AgentInstance, fields: dict) -> AgentInstance:
    _not_managed(instance.agent)
    if "base_url" in fields:
        fields["base_url"] = validate_base_url(fields["base_url"])
        instance.health, instance.consecutive_successes, instance.consecutive_failures = "unknown", 0, 0
    for key, item in fields.items():
        setattr(instance, key, item)
    instance.save()
    agent = instance.agent
    audit.record(
        "agent.changed",
        project=agent.project_id,
        target=f"agent:{agent.name}",
        details={"instance_changed": instance.pk, "fields": sorted(fields)},
    )
    return instance


@transaction.atomic
def instance_delete(*, instance: AgentInstance) -> None:
    _not_managed(instance.agent)
    pk, agent = instance.pk, instance.agent
    instance.delete()
    audit.record(
        "agent.changed", project=agent.project_id, target=f"agent:{agent.name}", details={"instance_removed": pk}
    )
