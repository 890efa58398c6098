"""`make up` (development only): run a node agent on this machine, enrolled and approved as a platform node."""

from __future__ import annotations

import os
from pathlib import Path

from django.conf import settings

from nodeagent import state
from nodeagent.config import default_name

BASE = Path(__file__).resolve().parent.parent


def _say(msg: str) -> None:
    print(f"[euler] {msg}", flush=True)


def local_node_env(*, port: int | str, state_dir: Path, name: str, token: str | None) -> dict:
    # Only what the agent needs: it never sees the platform's database URL or keys.
    keep = (
        "PATH",
        "HOME",
        "LANG",
        "LC_ALL",
        "TZ",
        "DOCKER_HOST",
        "DOCKER_CERT_PATH",
        "DOCKER_TLS_VERIFY",
        "EULER_LOG_LEVEL",
        "EULER_NODE_LABELS",
        # The lender's settings, for trying them on the local node.
        "EULER_NODE_MAX_CPU_MILLI",
        "EULER_NODE_MAX_MEMORY_BYTES",
        "EULER_NODE_MAX_DISK_BYTES",
        "EULER_NODE_GPUS",
        "EULER_NODE_JOB_EGRESS",
        "EULER_NODE_JOB_ALLOWED_NETWORKS",
    )
    env = {k: os.environ[k] for k in keep if k in os.environ}
    if "EULER_NODE_JOB_EGRESS" not in env and hasattr(os, "geteuid") and os.geteuid() != 0:
        # Egress rules need root (iptables); without them the agent would refuse every networked job. On the
        # developer's own machine, say so and run jobs unrestricted (the node shows it) rather than break them.
        env["EULER_NODE_JOB_EGRESS"] = "unrestricted"
        _say("local node: not root, so no egress rules: jobs' network is unrestricted (run as root for the policy)")
    env.update(
        EULER_CONTROL_PLANE_URL=f"http://127.0.0.1:{port}",
        EULER_NODE_NAME=name,
        EULER_NODE_STATE_DIR=str(state_dir),
    )
    if token:
        env["EULER_ENROLLMENT_TOKEN"] = token
    return env


def maybe_start_local_node(sup, port) -> bool:
    """Start `./euler-node` under the supervisor when DJANGO_DEBUG is on and a Docker engine answers.
    The first time, it enrolls with a platform token that approves it at once (honoured in DEBUG only)."""
    from nodeagent.probe import docker_version
    from nodes.models import Node
    from nodes.services import enrollment_token_create, node_approve

    if not settings.DEBUG:
        return False
    if docker_version(timeout=3) is None:
        _say("no Docker engine answers: not starting a local node")
        return False
    state_dir = settings.DATA_DIR / "local-node"
    name = os.environ.get("EULER_LOCAL_NODE_NAME") or f"local-{default_name()}"[:63]
    token = None
    if state.load_credential(state_dir) is None:
        if Node.objects.filter(name=name).exists():
            name = f"{name[:50]}-{os.getpid()}"
        _, token = enrollment_token_create(trust="platform", ttl=3600, label="make up: local node", auto_approve=True)
    else:
        node = Node.objects.filter(name=state.load_node(state_dir).get("name", name)).first()
        if node is not None and node.approval != "approved":
            node_approve(node=node, trust="platform", public_pool=True)
    sup.spawn(
        "node", [str(BASE / "euler-node")], local_node_env(port=port, state_dir=state_dir, name=name, token=token)
    )
    _say(f"local node {name!r}: platform trust, auto-approved (development only); state in {state_dir}")
    return True
