"""A replica's place in its service's rotation: the instance address the gateway reaches it by.

The address of a replica is `euler-node://<attempt id>:<port>`: the gateway (gateway/proxy.py) and the health
checker (agents/health.py) reach it through the node path (the connection the node agent keeps to the control
plane, gateway/tunnel.py), never by dialling the lender's host. docs/architecture.md ("Services", "The node
tunnel") holds the contract.

No other address is ever written: the agent's isolation chain refuses any new connection from the host into a job
network (nodeagent/egress_plan.py), so even on one host the node path is the only way in.
"""

from __future__ import annotations

import logging

SCHEME = "euler-node"
log = logging.getLogger(__name__)


def node_path_url(attempt_id: int, port: int) -> str:
    return f"{SCHEME}://{int(attempt_id)}:{int(port)}"


def parse(url: str) -> tuple[int, int] | None:
    """(attempt id, port) of a node-path address, or None when it is not one."""
    prefix = f"{SCHEME}://"
    if not url.startswith(prefix):
        return None
    attempt, _, port = url[len(prefix) :].rstrip("/").partition(":")
    if not attempt.isdigit() or not port.isdigit():
        return None
    return int(attempt), int(port)


def address(attempt_id: int, port: int, container_id: str = "") -> str | None:
    """The base URL of the replica's instance (`container_id` is unused: the node path needs none)."""
    return node_path_url(attempt_id, port)
