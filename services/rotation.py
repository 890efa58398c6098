"""A replica's place in its service's rotation: the instance address the gateway reaches it by.

The address of a replica is `euler-node://<attempt id>:<port>`: the gateway (gateway/proxy.py) and the health
checker (agents/health.py) reach it through the node path (the connection the node agent keeps to the control
plane, gateway/tunnel.py), never by dialling the lender's host. docs/architecture.md ("Services", "The node
tunnel") holds the contract.

EULER_SERVICE_DIRECT_DOCKER (tests only) replaces it with the container's address on the agent's job network,
read from the local Docker engine, for end-to-end tests that run everything on one host before the node path.
"""

from __future__ import annotations

import logging

from django.conf import settings

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
    """The base URL of the replica's instance; None when it cannot be known yet (direct mode: no container)."""
    if not settings.EULER_SERVICE_DIRECT_DOCKER:
        return node_path_url(attempt_id, port)
    return _docker_address(container_id, port) if container_id else None


def _docker_address(container_id: str, port: int) -> str | None:  # pragma: no cover - e2e only
    """The container's address on its network, by the id its node reported (unique on the engine)."""
    import docker

    try:
        client = docker.from_env(timeout=5)
        try:
            container = client.containers.get(container_id)
            for net in (container.attrs.get("NetworkSettings", {}).get("Networks") or {}).values():
                if net.get("IPAddress"):
                    return f"http://{net['IPAddress']}:{int(port)}"
        finally:
            client.close()
    except Exception:  # noqa: BLE001 - the next pass tries again
        log.warning("no address for container %s on the local engine yet", container_id[:12], exc_info=True)
    return None
