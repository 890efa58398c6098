"""GPU health on the server: what a heartbeat's GPUs say of it (events), and an operator's reset.

The agent decides a GPU's health (nodeagent/gpuhealth.py: XID events, ECC counters) and reports it in every
heartbeat; the row keeps it in `Node.gpus` (`healthy`, `health_reason`) and the scheduler offers only healthy
GPUs (jobs.scheduling.loading). A reset is a request to the agent: `Node.gpu_resets[uuid]` grows by one and
travels in every heartbeat reply; the agent clears its mark once per new number and looks again, so the GPU
returns only when its next heartbeat says so, and a fault it still sees marks it again.
"""

from __future__ import annotations

import logging

from django.db import transaction

import audit
from euler.errors import Conflict, InvalidInput
from nodes import transitions
from nodes.models import EventKind, Node

log = logging.getLogger(__name__)


def describe(gpu: dict) -> str:
    return f"GPU {gpu.get('index', '?')} ({gpu.get('uuid', '?')})"


def health_changes(before: list[dict], after: list[dict]) -> list[tuple[dict, bool]]:
    """The GPUs whose health a report changes: (the GPU as reported now, healthy now). Pure."""
    was = {g.get("uuid"): g.get("healthy", True) for g in before or []}
    return [
        (g, g.get("healthy", True))
        for g in after or []
        if g.get("uuid") in was and was[g.get("uuid")] != g.get("healthy", True)
    ]


def record_changes(node: Node, before: list[dict], after: list[dict]) -> None:
    """One NodeEvent per GPU whose health a heartbeat changed (the lender's and the operator's "why")."""
    for gpu, healthy in health_changes(before, after):
        if healthy:
            transitions.event(node, EventKind.GPU_HEALTHY, f"{describe(gpu)} healthy again", data={"uuid": gpu["uuid"]})
            log.info("node %s: %s healthy again", node.name, describe(gpu))
        else:
            reason = gpu.get("health_reason") or "unhealthy"
            transitions.event(
                node,
                EventKind.GPU_UNHEALTHY,
                f"{describe(gpu)} unhealthy: {reason}; no new jobs go to it until an operator resets it",
                data={"uuid": gpu["uuid"], "reason": reason},
            )
            log.warning("node %s: %s unhealthy: %s", node.name, describe(gpu), reason)


def unhealthy(node: Node) -> list[dict]:
    return [g for g in node.gpus or [] if not g.get("healthy", True)]


@transaction.atomic
def node_gpu_reset(*, node: Node, uuid: str | None = None, by=None) -> list[str]:
    """Ask the node's agent to clear its health mark on one GPU (`uuid`), or on every unhealthy one (None).

    400 unknown_gpu: no such GPU on the node; 409 gpu_healthy: nothing to reset. Returns the UUIDs asked for."""
    locked = Node.objects.select_for_update().get(pk=node.pk)
    if uuid is not None and not any(g.get("uuid") == uuid for g in locked.gpus or []):
        raise InvalidInput(f"Node {locked.name} has no GPU {uuid[:128]}.", code="unknown_gpu")
    targets = [g for g in unhealthy(locked) if uuid is None or g.get("uuid") == uuid]
    if not targets:
        raise Conflict(f"Node {locked.name}: {'GPU ' + uuid if uuid else 'every GPU'} is healthy.", code="gpu_healthy")
    resets = dict(locked.gpu_resets or {})
    for gpu in targets:
        resets[gpu["uuid"]] = int(resets.get(gpu["uuid"], 0)) + 1
        transitions.event(
            locked,
            EventKind.GPU_RESET,
            f"{describe(gpu)} reset requested (was: {gpu.get('health_reason') or 'unhealthy'}); "
            "it returns once the agent no longer sees the fault",
            by=by,
            data={"uuid": gpu["uuid"], "reason": gpu.get("health_reason", "")},
        )
    locked.gpu_resets = resets
    locked.save(update_fields=["gpu_resets"])  # post_save: the web processes' cached rows (and replies) follow
    uuids = [g["uuid"] for g in targets]
    audit.record("node.gpu_reset", project=locked.owner_project_id, target=f"node:{locked.name}", by=by,
                 details={"gpus": uuids})  # fmt: skip
    return uuids
