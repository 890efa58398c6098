"""The one door for an id or a name that a caller supplies: every tenant object named in a URL, a body or a query
string (a job, an array, an output, a schedule, a webhook and its deliveries, an agent and its instances) resolves
here, filtered by the caller's project, so another project's object answers 404 exactly like a missing one. A
background read that acts for a caller (the scheduler's input gate, a pending reason) passes the job's own project.

Every lookup below names the project; tests/security/test_scoped_lookups.py walks this module for one that does
not, and the rest of the code for a lookup by id that bypasses it. Models are named by label (no import): the
gateway reads agents through here and must not import jobs (the gateway-jobs-independent contract).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from django.apps import apps
from django.db.models import Model, QuerySet

from euler.errors import NotFound

if TYPE_CHECKING:
    from agents.models import Agent, AgentInstance
    from workflows.models import Delivery, Schedule, Webhook

MAX_ID = 2**63 - 1  # a larger number is no row's id: 404, like a missing one


def _objects(label: str):
    return apps.get_model(label).objects


# --- the project's rows: each lookup by a caller's id starts from one of these ------------------------------------
# `project` is a Project or its id (a background read passes the job's project_id).
def jobs(*, project) -> QuerySet:  # of jobs.Job (not imported, even for annotations: see above)
    return _objects("jobs.Job").filter(project=project)


def arrays(*, project) -> QuerySet:  # of jobs.JobArray
    return _objects("jobs.JobArray").filter(project=project)


def attempts(*, project) -> QuerySet:
    return _objects("jobs.Attempt").filter(job__project=project)


def outputs(*, project) -> QuerySet:
    return _objects("outputs.OutputFile").filter(project=project)


def checkpoints(*, project) -> QuerySet:  # of checkpoints.Checkpoint
    return _objects("checkpoints.Checkpoint").filter(project=project)


def checkpoint_blobs(*, project) -> QuerySet:  # of checkpoints.CheckpointBlob
    return _objects("checkpoints.CheckpointBlob").filter(project=project)


def schedules(*, project) -> QuerySet[Schedule]:
    return _objects("workflows.Schedule").filter(project=project)


def webhooks(*, project) -> QuerySet[Webhook]:
    return _objects("workflows.Webhook").filter(project=project)


def deliveries(*, project) -> QuerySet[Delivery]:
    return _objects("workflows.Delivery").filter(hook__project=project)


def agents(*, project) -> QuerySet[Agent]:
    return _objects("agents.Agent").filter(project=project)


def instances(*, project) -> QuerySet[AgentInstance]:
    return _objects("agents.AgentInstance").filter(agent__project=project)


# --- one object, or 404 ---------------------------------------------------------------------------------------------
def as_id(raw) -> int | None:
    """A caller's id as an int, or None when it cannot be any row's (not a whole number, out of range)."""
    if isinstance(raw, bool):
        return None
    try:
        value = int(raw)
    except (TypeError, ValueError):
        return None
    return value if 1 <= value <= MAX_ID else None


def missing(what: str, raw, field: str = "") -> NotFound:
    """The one 404 for a missing and for another project's object: the text names only what the caller sent."""
    if not field:
        return NotFound(f"No such {what}.")
    return NotFound(f"No such {what}: {str(raw)[:40]} ({field}).")


def _one(rows: QuerySet, raw, *, what: str, field: str = ""):
    pk = as_id(raw)
    found = rows.filter(pk=pk).first() if pk is not None else None
    if found is None:
        raise missing(what, raw, field)
    return found


def job(*, project, job_id, field: str = "") -> Model:  # a jobs.Job
    """The project's job (without its env); `field` names where the caller wrote the id (e.g. inputs_from)."""
    return _one(jobs(project=project).defer("env"), job_id, what="job", field=field)


def array(*, project, array_id, field: str = "") -> Model:  # a jobs.JobArray
    return _one(arrays(project=project), array_id, what="array", field=field)


def webhook(*, project, hook_id) -> Webhook:
    return _one(webhooks(project=project), hook_id, what="webhook")


def delivery(*, hook: Webhook, delivery_id) -> Delivery:
    """A delivery of a hook that was itself resolved in the caller's project."""
    return _one(deliveries(project=hook.project_id).filter(hook=hook), delivery_id, what="delivery")


def schedule(*, project, name: str) -> Schedule:
    found = schedules(project=project).filter(name=name).first() if isinstance(name, str) else None
    if found is None:
        raise NotFound("No such schedule.")
    return found


def agent(*, project, name: str) -> Agent:
    found = agents(project=project).filter(name=name).first() if isinstance(name, str) else None
    if found is None:
        raise NotFound(f"No agent named {str(name)[:100]!r}.")
    return found


def instance(*, agent: Agent, instance_id) -> AgentInstance:
    """An instance of an agent that was itself resolved in the caller's project."""
    return _one(instances(project=agent.project_id).filter(agent=agent), instance_id, what="instance")


# --- many ids at once (a body's list): all of them, or 404 naming the first missing -------------------------------
def _all(rows: QuerySet, raw_ids: Iterable, *, what: str, field: str) -> set[int]:
    raw_ids = list(raw_ids)
    wanted = {as_id(raw) for raw in raw_ids}
    found = set(rows.filter(pk__in=wanted - {None}).values_list("pk", flat=True)) if wanted - {None} else set()
    for raw in raw_ids:
        if as_id(raw) not in found:
            raise missing(what, raw, field)
    return found


def job_ids(*, project, ids: Iterable, field: str) -> set[int]:
    return _all(jobs(project=project), ids, what="job", field=field)


def array_ids(*, project, ids: Iterable, field: str) -> set[int]:
    return _all(arrays(project=project), ids, what="array", field=field)
