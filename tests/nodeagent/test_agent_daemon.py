"""The daemon's enroll and heartbeat against the real Django views (live server on loopback)."""

import pytest

from nodeagent import daemon as daemon_mod
from nodeagent import protocol
from nodeagent.config import AgentConfig

pytestmark = pytest.mark.django_db(transaction=True)


class FakeProbe:
    docker = None

    def resources(self):
        return protocol.Resources(cpu_milli=2000, memory_bytes=4 << 30, gpus=[])


class RecordingExecutor(daemon_mod.NullExecutor):
    def __init__(self):
        self.commands = []

    def handle_command(self, command):
        self.commands.append(command)


@pytest.fixture
def token(make_user):
    from nodes.services import enrollment_token_create

    return enrollment_token_create(trust="platform", by=make_user("ops", staff=True))[1]


def _daemon(live_server, tmp_path, token=None):
    config = AgentConfig(url=live_server.url, name="d1", state_dir=tmp_path / "st", enrollment_token=token)
    return daemon_mod.Daemon(config, probe=FakeProbe(), executor=RecordingExecutor())


def test_the_daemon_enrolls_keeps_its_credential_and_heartbeats(live_server, tmp_path, token):
    from nodes.models import Node

    d = _daemon(live_server, tmp_path, token)
    d.enroll()
    assert (tmp_path / "st" / "credential").read_text().startswith("euler_node_")
    reply = d.heartbeat_once()
    assert reply.approval == "pending" and d.approval == "pending"
    assert d.poll_wait == reply.poll_wait == protocol.POLL_WAIT_SECONDS  # the server's wait for its long-polls
    node = Node.objects.get(name="d1")
    assert node.online and node.cpu_milli == 2000

    again = _daemon(live_server, tmp_path)  # a restart: no token needed any more
    again.enroll()
    assert again.heartbeat_once().approval == "pending"


def test_heartbeat_commands_reach_the_executor(live_server, tmp_path, token, monkeypatch):
    from nodes import channel

    monkeypatch.setattr(
        channel, "_heartbeat_hooks", [lambda node, hb: [protocol.Command(type="stop_attempt", attempt_id=3)]]
    )
    d = _daemon(live_server, tmp_path, token)
    d.enroll()
    d.heartbeat_once()
    assert [c.attempt_id for c in d.executor.commands] == [3]


def test_without_a_token_or_credential_the_daemon_exits_78_saying_why(live_server, tmp_path, caplog):
    d = _daemon(live_server, tmp_path)
    assert d.run() == daemon_mod.EXIT_CONFIG
    assert "EULER_ENROLLMENT_TOKEN is not set" in caplog.text


def test_a_revoked_credential_stops_the_daemon_with_78(live_server, tmp_path, token):
    from nodes.models import Node
    from nodes.services import node_revoke_credential

    d = _daemon(live_server, tmp_path, token)
    d.enroll()
    node_revoke_credential(node=Node.objects.get(name="d1"))
    d.heartbeat_loop()  # returns once the refusal stops the daemon
    assert d.stop.is_set() and "re-enroll" in d.fatal


class MachineProbe:
    docker = "20.10"

    def resources(self):
        gpus = [protocol.GpuInfo(uuid=f"GPU-{i}", index=i, model="A10", memory_bytes=24 << 30) for i in range(2)]
        return protocol.Resources(cpu_milli=16000, memory_bytes=64 << 30, disk_bytes=900 << 30, gpus=gpus)


def test_a_capped_node_offers_its_caps_in_the_api(live_server, tmp_path, project, api):
    from nodeagent.offer import Caps
    from nodes.services import enrollment_token_create

    _, secret = enrollment_token_create(project=project)
    caps = Caps(cpu_milli=2000, memory_bytes=4 << 30, disk_bytes=50 << 30, gpus=("GPU-1",))
    config = AgentConfig(
        url=live_server.url, name="lent", state_dir=tmp_path / "st", enrollment_token=secret, caps=caps
    )
    d = daemon_mod.Daemon(config, probe=MachineProbe(), executor=RecordingExecutor())
    d.enroll()
    d.heartbeat_once()
    node = api.get("/api/v1/nodes").json()["own"][0]
    assert (node["cpu_milli"], node["memory_bytes"], node["disk_bytes"]) == (2000, 4 << 30, 50 << 30)
    assert [g["uuid"] for g in node["gpus"]] == ["GPU-1"]
    assert node["capped"] == ["cpu", "memory", "disk", "gpus"]


TERMS = {"timezone": "UTC", "windows": [{"days": ["sat", "sun"], "start": "00:00", "end": "23:59"}], "max_job_hours": 4}


def _lender_daemon(live_server, tmp_path, token, terms):
    config = AgentConfig(url=live_server.url, name="t1", state_dir=tmp_path / "st", enrollment_token=token, terms=terms)
    return daemon_mod.Daemon(config, probe=FakeProbe(), executor=RecordingExecutor())


def test_the_lenders_terms_in_the_agents_configuration_apply_once_approved_once_per_start(live_server, tmp_path, token):
    from audit.models import AuditEvent
    from nodes.models import Node
    from nodes.transitions import node_approve

    d = _lender_daemon(live_server, tmp_path, token, TERMS)
    d.enroll()
    d.heartbeat_once()  # pending: the approved capacity that bounds them is not there yet
    node = Node.objects.get(name="t1")
    assert not node.lender_terms and not d.terms_sent
    node_approve(node=node, trust="platform")
    d.heartbeat_once()
    node.refresh_from_db()
    assert (node.lender_terms["max_job_hours"], node.lender_terms["windows"][0]["days"]) == (4, ["sat", "sun"])
    assert AuditEvent.objects.filter(action="node.terms_changed", actor="node:t1", target="node:t1").exists()
    Node.objects.filter(pk=node.pk).update(lender_terms={})  # the lender changes them in the console meanwhile
    d.heartbeat_once()
    node.refresh_from_db()
    assert node.lender_terms == {}  # not sent again in this start


def test_terms_above_the_approved_capacity_are_refused_and_the_earlier_terms_stand(
    live_server, tmp_path, token, caplog
):
    from nodes.models import Node
    from nodes.transitions import node_approve

    d = _lender_daemon(live_server, tmp_path, token, {"max_cpu_milli": 64000})
    d.enroll()
    d.heartbeat_once()
    node = Node.objects.get(name="t1")
    node_approve(node=node, trust="platform")
    Node.objects.filter(pk=node.pk).update(lender_terms={"max_job_hours": 2})
    d.heartbeat_once()
    node.refresh_from_db()
    assert node.lender_terms == {"max_job_hours": 2} and d.terms_sent
    assert "EULER_NODE_TERMS were refused (400 cap_above_approved" in caplog.text


def test_terms_from_a_pending_node_or_not_an_object_are_refused(live_server, tmp_path, token):
    import httpx

    d = _lender_daemon(live_server, tmp_path, token, None)
    d.enroll()
    d.heartbeat_once()
    url = f"{live_server.url}/node-api/v1/{protocol.PATH_TERMS}"
    headers = {"Authorization": f"Bearer {d.client.credential}"}
    r = httpx.put(url, json={"max_job_hours": 1}, headers=headers)
    assert (r.status_code, r.json()["code"]) == (409, "node_not_approved")
    assert httpx.put(url, json={"max_job_hours": 1}).status_code == 401
    from nodes.models import Node
    from nodes.transitions import node_approve

    node_approve(node=Node.objects.get(name="t1"), trust="platform")
    r = httpx.put(url, json=[1], headers=headers)
    assert (r.status_code, r.json()["code"]) == (400, "invalid_terms")
