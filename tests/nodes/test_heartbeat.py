import pytest

from nodes import services
from nodes.models import Approval, EventKind, Node
from nodes.signals import node_available
from tests.nodes.conftest import gpu

pytestmark = pytest.mark.django_db

HEARTBEAT = "/node-api/v1/heartbeat"


def test_a_node_is_online_from_its_enrollment_and_a_heartbeat_answers_its_approval_and_the_next_interval(
    platform_node, heartbeat
):
    node, cred = platform_node
    assert node.online and node.last_heartbeat_at is not None  # the enrollment was its first sign of life
    r = heartbeat(cred, cpu_milli=8000)
    assert r.status_code == 200
    body = r.json()
    assert body["approval"] == "pending" and body["draining"] is False and body["commands"] == []
    assert 0 < body["heartbeat_interval"] <= 5
    node.refresh_from_db()
    assert node.online and node.last_heartbeat_at is not None and node.cpu_milli == 8000
    assert node.events.filter(kind=EventKind.ONLINE).count() == 0  # not "back online": it never left


def test_heartbeats_write_no_event(platform_node, heartbeat):
    node, cred = platform_node
    heartbeat(cred)
    heartbeat(cred)
    assert node.events.filter(kind=EventKind.ONLINE).count() == 0


def test_the_usual_heartbeat_costs_one_query_besides_the_hooks(
    platform_node, heartbeat, django_assert_max_num_queries, monkeypatch
):
    from nodes import channel

    monkeypatch.setattr(channel, "_heartbeat_hooks", [])
    node, cred = platform_node
    heartbeat(cred)
    with django_assert_max_num_queries(1):
        assert heartbeat(cred).status_code == 200


@pytest.mark.parametrize(
    "body",
    [
        {"resources": {"cpu_milli": -1, "memory_bytes": 1}},
        {"resources": {"cpu_milli": 1, "memory_bytes": 1}, "surprise": 1},
        {"running": []},
        {"resources": {"cpu_milli": 1, "memory_bytes": 1, "gpus": [{"uuid": "", "index": 0, "memory_bytes": 1}]}},
        [],
    ],
)
def test_a_malformed_heartbeat_gets_400_invalid_heartbeat_and_leaves_the_node_unchanged(
    platform_node, node_client, body
):
    node, cred = platform_node
    before = Node.objects.filter(pk=node.pk).values().get()
    r = node_client(cred).post(HEARTBEAT, body, format="json")
    assert r.status_code == 400 and r.json()["code"] == "invalid_heartbeat"
    assert Node.objects.filter(pk=node.pk).values().get() == before


def test_a_heartbeat_that_is_not_json_gets_400_invalid_heartbeat(platform_node, node_client):
    _, cred = platform_node
    r = node_client(cred).post(HEARTBEAT, "{nope", content_type="application/json")
    assert r.status_code == 400 and r.json()["code"] == "invalid_heartbeat"


def test_an_unknown_credential_gets_401(node_client, heartbeat):
    r = heartbeat("euler_node_" + "y" * 43)
    assert r.status_code == 401 and r.json()["code"] == "invalid_node_credential"


def test_no_credential_gets_401(node_client):
    r = node_client().post(HEARTBEAT, {}, format="json")
    assert r.status_code == 401 and r.json()["code"] == "no_credential"


def test_a_rejected_nodes_credential_gets_401_node_rejected(platform_node, heartbeat):
    node, cred = platform_node
    services.node_reject(node=node)
    r = heartbeat(cred)
    assert r.status_code == 401 and r.json()["code"] == "node_rejected"


def test_a_revoked_credential_gets_401(platform_node, heartbeat):
    node, cred = platform_node
    services.node_revoke_credential(node=node)
    assert heartbeat(cred).status_code == 401


def test_a_rotated_credential_replaces_the_old_one(platform_node, heartbeat, node_client):
    node, cred = platform_node
    r = node_client(cred).post("/node-api/v1/credential/rotate", {}, format="json")
    assert r.status_code == 200
    new = r.json()["credential"]
    assert heartbeat(cred).status_code == 401
    assert heartbeat(new).status_code == 200


def test_an_approved_node_reporting_a_different_gpu_set_goes_back_to_pending_with_an_event(
    enroll, platform_token, heartbeat
):
    node, cred = enroll(platform_token, "g1", resources={"cpu_milli": 1000, "memory_bytes": 1, "gpus": [gpu("GPU-a")]})
    services.node_approve(node=node)
    assert heartbeat(cred, gpus=[gpu("GPU-a")]).json()["approval"] == "approved"
    r = heartbeat(cred, gpus=[gpu("GPU-a"), gpu("GPU-b", index=1, model="NVIDIA A10")])
    assert r.json()["approval"] == "pending"
    node.refresh_from_db()
    assert node.approval == Approval.PENDING
    event = node.events.get(kind=EventKind.GPUS_CHANGED)
    assert "added GPU-b (NVIDIA A10)" in event.message


def test_live_gpu_figures_do_not_count_as_a_different_gpu_set(enroll, platform_token, heartbeat):
    node, cred = enroll(platform_token, "g1", resources={"cpu_milli": 1000, "memory_bytes": 1, "gpus": [gpu("GPU-a")]})
    services.node_approve(node=node)
    busy = {**gpu("GPU-a"), "utilization": 97.0, "memory_used_bytes": 123}
    assert heartbeat(cred, gpus=[busy]).json()["approval"] == "approved"


def test_a_changed_capacity_on_an_approved_node_sends_node_available(platform_node, heartbeat):
    node, cred = platform_node
    services.node_approve(node=node)
    heartbeat(cred)
    seen = []

    def listener(sender, node_id, **kw):
        seen.append(node_id)

    node_available.connect(listener)
    try:
        heartbeat(cred, cpu_milli=16000)
    finally:
        node_available.disconnect(listener)
    assert seen == [node.pk]


def test_the_heartbeat_hooks_commands_are_in_the_reply(platform_node, heartbeat):
    from nodeagent import protocol
    from nodes import channel

    def hook(node, hb):
        return [protocol.Command(type="stop_attempt", attempt_id=7, reason="stale_attempt")]

    channel.register_heartbeat_hook(hook)
    try:
        _, cred = platform_node
        body = heartbeat(cred).json()
    finally:
        channel._heartbeat_hooks.remove(hook)
    assert body["commands"] == [{"type": "stop_attempt", "attempt_id": 7, "reason": "stale_attempt", "grace": None}]


def test_a_draining_node_is_told_so(platform_node, heartbeat):
    node, cred = platform_node
    services.node_drain(node=node)
    assert heartbeat(cred).json()["draining"] is True


@pytest.mark.parametrize(
    "change,expect",
    [
        (lambda node: services.node_reject(node=node), (401, "node_rejected")),
        (lambda node: services.node_revoke_credential(node=node), (401, "invalid_node_credential")),
        (lambda node: services.node_rotate_credential(node=node), (401, "invalid_node_credential")),
    ],
)
def test_a_node_known_to_the_process_is_still_refused_at_once_after_being_cut_off(
    platform_node, heartbeat, change, expect
):
    node, cred = platform_node
    heartbeat(cred)
    heartbeat(cred)
    change(node)
    r = heartbeat(cred)
    assert (r.status_code, r.json()["code"]) == expect


def test_a_node_known_to_the_process_sees_approval_and_draining_changes_at_once(platform_node, heartbeat):
    node, cred = platform_node
    assert heartbeat(cred).json()["approval"] == "pending"
    services.node_approve(node=node)
    assert heartbeat(cred).json()["approval"] == "approved"
    services.node_drain(node=node)
    assert heartbeat(cred).json()["draining"] is True
    services.node_undrain(node=node)
    assert heartbeat(cred).json()["draining"] is False


def test_a_gpu_change_is_caught_on_the_fast_path_too(enroll, platform_token, heartbeat):
    node, cred = enroll(platform_token, "g1", resources={"cpu_milli": 1000, "memory_bytes": 1, "gpus": [gpu("GPU-a")]})
    services.node_approve(node=node)
    heartbeat(cred, gpus=[gpu("GPU-a")])
    heartbeat(cred, gpus=[gpu("GPU-a")])
    assert heartbeat(cred, gpus=[gpu("GPU-z")]).json()["approval"] == "pending"
    assert node.events.filter(kind=EventKind.GPUS_CHANGED).count() == 1
