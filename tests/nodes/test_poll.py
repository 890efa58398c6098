import threading

import pytest

from nodeagent import protocol
from nodes import channel, services

POLL = "/node-api/v1/poll"


def _assignment(attempt_id: int = 1) -> protocol.Assignment:
    return protocol.Assignment(
        attempt_id=attempt_id,
        job_id=1,
        attempt_number=1,
        image="euler-test/busybox",
        command=["true"],
        cpu_milli=100,
        memory_bytes=1 << 20,
        timeout_seconds=60,
    )


@pytest.fixture
def provider(monkeypatch):
    state = {"work": [], "asked": threading.Event(), "nodes": []}

    def fn(node):
        state["nodes"].append(node.name)
        state["asked"].set()
        return list(state["work"]), []

    monkeypatch.setattr(channel, "_poll_providers", [fn])
    return state


@pytest.mark.django_db
def test_a_poll_answers_at_once_when_the_provider_has_work(platform_node, node_client, provider):
    node, cred = platform_node
    services.node_approve(node=node)
    provider["work"] = [_assignment(5)]
    r = node_client(cred).post(POLL, {"wait": 20}, format="json")
    assert r.status_code == 200
    assert [a["attempt_id"] for a in r.json()["assignments"]] == [5]


@pytest.mark.django_db
def test_a_poll_with_nothing_to_do_answers_empty_after_its_wait(platform_node, node_client, provider):
    node, cred = platform_node
    services.node_approve(node=node)
    r = node_client(cred).post(POLL, {"wait": 0}, format="json")
    assert r.json() == {"assignments": [], "commands": []}


@pytest.mark.django_db
def test_a_pending_node_is_not_offered_work(platform_node, node_client, provider):
    _, cred = platform_node
    provider["work"] = [_assignment()]
    r = node_client(cred).post(POLL, {"wait": 0}, format="json")
    assert r.json()["assignments"] == [] and provider["nodes"] == []


@pytest.mark.django_db
def test_a_malformed_poll_gets_400_and_a_bad_credential_401(platform_node, node_client, provider):
    _, cred = platform_node
    r = node_client(cred).post(POLL, {"wait": 1000}, format="json")
    assert r.status_code == 400 and r.json()["code"] == "invalid_poll"
    r = node_client("euler_node_" + "z" * 43).post(POLL, {}, format="json")
    assert r.status_code == 401 and r.json()["code"] == "invalid_node_credential"


@pytest.mark.django_db
def test_a_poll_over_plain_http_from_outside_gets_403(platform_node, node_client):
    _, cred = platform_node
    r = node_client(cred, REMOTE_ADDR="198.51.100.4").post(POLL, {}, format="json")
    assert r.status_code == 403 and r.json()["code"] == "https_required"


@pytest.mark.django_db(transaction=True)
def test_a_wake_up_answers_a_held_poll_with_the_new_work(platform_node, node_client, provider):
    node, cred = platform_node
    services.node_approve(node=node)
    result = {}

    def hold():
        result["response"] = node_client(cred).post(POLL, {"wait": 30}, format="json")

    thread = threading.Thread(target=hold)
    thread.start()
    assert provider["asked"].wait(20), "the poll never asked the providers"
    provider["work"] = [_assignment(9)]
    channel.wake(node.pk)
    thread.join(25)
    assert not thread.is_alive(), "the wake-up did not answer the poll"
    assert [a["attempt_id"] for a in result["response"].json()["assignments"]] == [9]
