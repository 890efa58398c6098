import pytest

from nodes import devnode
from nodes.models import Approval, EnrollmentToken

pytestmark = pytest.mark.django_db


class FakeSupervisor:
    def __init__(self):
        self.spawned = []

    def spawn(self, name, argv, env=None):
        self.spawned.append((name, argv, env))


def test_make_up_starts_a_local_platform_node_with_an_auto_approving_token(settings, tmp_path, monkeypatch):
    settings.DEBUG = True
    settings.DATA_DIR = tmp_path
    monkeypatch.setattr("nodeagent.probe.docker_version", lambda timeout=5: "27.0")
    sup = FakeSupervisor()
    assert devnode.maybe_start_local_node(sup, port=8123)
    ((name, argv, env),) = sup.spawned
    assert name == "node" and argv[0].endswith("euler-node")
    assert env["EULER_CONTROL_PLANE_URL"] == "http://127.0.0.1:8123"
    assert env["EULER_NODE_STATE_DIR"] == str(tmp_path / "local-node")
    token = EnrollmentToken.objects.get()
    assert token.auto_approve and token.project is None and token.trust == "platform"


def test_no_local_node_without_docker_or_outside_debug(settings, monkeypatch):
    sup = FakeSupervisor()
    settings.DEBUG = False
    assert not devnode.maybe_start_local_node(sup, port=1)
    settings.DEBUG = True
    monkeypatch.setattr("nodeagent.probe.docker_version", lambda timeout=5: None)
    assert not devnode.maybe_start_local_node(sup, port=1)
    assert sup.spawned == [] and not EnrollmentToken.objects.exists()


def test_an_enrolled_local_node_restarts_without_a_token(settings, tmp_path, monkeypatch):
    from nodeagent import state
    from nodes.models import Node

    settings.DEBUG = True
    settings.DATA_DIR = tmp_path
    monkeypatch.setattr("nodeagent.probe.docker_version", lambda timeout=5: "27.0")
    Node.objects.create(name="local-x", trust="platform")
    state.save_enrollment(tmp_path / "local-node", credential="euler_node_x", node_id=1, name="local-x", url="u")
    sup = FakeSupervisor()
    devnode.maybe_start_local_node(sup, port=1)
    assert "EULER_ENROLLMENT_TOKEN" not in sup.spawned[0][2]
    assert Node.objects.get(name="local-x").approval == Approval.APPROVED
