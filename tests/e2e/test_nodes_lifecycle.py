"""Enroll → pending → approved → online; a reused token is refused; kill -9 → offline; restart → online."""

from __future__ import annotations

import pytest

from nodes.models import Approval, EventKind, Node

pytestmark = pytest.mark.e2e

OFFLINE_AFTER = 3
FAST = {
    "EULER_NODE_OFFLINE_AFTER": str(OFFLINE_AFTER),
    "EULER_NODE_OFFLINE_CHECK_EVERY": "1",
    "EULER_NODE_HEARTBEAT_MIN_INTERVAL": "0.5",
}


def _node(name: str) -> Node | None:
    return Node.objects.filter(name=name).first()


def test_a_real_agent_enrolls_is_approved_goes_offline_when_killed_and_comes_back_without_a_token(platform_factory):
    from nodes.services import enrollment_token_create, node_approve

    platform = platform_factory(env=FAST)
    _, token = enrollment_token_create(trust="platform", label="e2e")

    agent = platform.start_agent("e2e-1", token=token)
    node = platform.wait_for(lambda: _node("e2e-1"), "the agent enrolls")
    assert node.approval == Approval.PENDING and node.trust == "platform"
    assert _node("e2e-1").online  # online from its enrollment
    credential_file = agent.state_dir / "credential"
    platform.wait_for(credential_file.exists, "the agent keeps its credential")
    assert credential_file.stat().st_mode & 0o777 == 0o600
    assert token not in credential_file.read_text()

    node_approve(node=node)
    platform.wait_for(lambda: "pending → approved" in agent.log(), "the agent learns it is approved")
    assert _node("e2e-1").online

    again = platform.start_agent("e2e-2", token=token)
    assert again.wait(timeout=60) == 78
    assert "enrollment_token_used" in again.log()
    assert _node("e2e-2") is None

    platform.kill_agent("e2e-1")
    platform.wait_for(lambda: not _node("e2e-1").online, "the killed node goes offline", timeout=OFFLINE_AFTER + 30)
    assert _node("e2e-1").events.filter(kind=EventKind.OFFLINE).count() == 1

    restarted = platform.restart_agent("e2e-1")
    platform.wait_for(lambda: _node("e2e-1").online, "the restarted node is online again")
    assert "using the credential" in restarted.log()
    assert _node("e2e-1").approval == Approval.APPROVED
    assert _node("e2e-1").events.filter(kind=EventKind.ONLINE).count() == 1  # back online (online since enrolled)

    # A clean stop (exit 0). The restarted agent may still be starting (its executor adopting, Docker answering
    # slowly under a loaded CI machine): give it longer than the default 15 s before the SIGKILL.
    assert restarted.stop(timeout=45) == 0
    assert "stopped" in restarted.log()
