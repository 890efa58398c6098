"""The other apps' heartbeat hooks (stop orders for attempts that are no longer current, usage): when they are
due, running them, and remembering when they ran (Redis and this process's memory)."""

from __future__ import annotations

import logging

from redis.exceptions import RedisError

from nodeagent import protocol
from nodes import beatmemo, channel, livestore
from nodes.models import Node

log = logging.getLogger(__name__)


def run_hooks(node: Node, hb: protocol.Heartbeat, rfp: str, now: float) -> list:
    """The other apps' heartbeat hooks; remembers when they ran, or that they want the next heartbeat too."""
    commands = channel.heartbeat_commands(node, hb)
    again = bool(commands) or getattr(commands, "again", False)
    try:
        pipe = livestore.client().pipeline(transaction=False)
        livestore.queue_hooks_ran(pipe, node_id=node.pk, running_fp=rfp, at=0 if again else now)
        pipe.execute()
    except RedisError:
        return list(commands)  # they run again next time
    beatmemo.hooks_ran(node.pk, rfp, 0 if again else now)
    return list(commands)


def hooks_in_background(node: Node, body: bytes, rfp: str, now: float) -> None:
    """memory.hooks_later's work: the hooks for a heartbeat already answered; their commands make them due
    again (_run_hooks records `again`), so the node's next heartbeat runs them on its verifying path."""
    try:
        run_hooks(node, protocol.Heartbeat.model_validate_json(body), rfp, now)
    except Exception:  # noqa: BLE001 - a pool thread: nobody else would see it
        log.exception("heartbeat hooks for node %s failed", node.pk)
        beatmemo.hooks_ran(node.pk, rfp, 0)  # due again at the next heartbeat
