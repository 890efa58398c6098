"""Fixtures for node tests: tokens, enrolled nodes, and a client speaking the node protocol."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from nodeagent import protocol


def resources(**over) -> dict:
    base = {"cpu_milli": 4000, "memory_bytes": 8 << 30, "gpus": [], "docker_version": "27.0"}
    return {**base, **over}


def gpu(uuid: str, index: int = 0, model: str = "NVIDIA H100", memory: int = 80 << 30) -> dict:
    return {"uuid": uuid, "index": index, "model": model, "memory_bytes": memory}


@pytest.fixture
def node_client():
    def make(credential: str | None = None, **extra) -> APIClient:
        c = APIClient(**extra)
        if credential:
            c.credentials(HTTP_AUTHORIZATION=f"Bearer {credential}")
        return c

    return make


@pytest.fixture
def platform_token(make_user):
    from nodes.services import enrollment_token_create

    _, secret = enrollment_token_create(trust="platform", by=make_user("ops", staff=True))
    return secret


@pytest.fixture
def enroll(node_client):
    """Enroll a node over the protocol; returns (node, credential)."""

    def do(token: str, name: str = "n1", **over):
        body = {"token": token, "name": name, "hostname": "host-" + name, "resources": resources(), **over}
        r = node_client().post("/node-api/v1/" + protocol.PATH_ENROLL, body, format="json")
        assert r.status_code == 201, r.json()
        from nodes.models import Node

        return Node.objects.get(pk=r.json()["node_id"]), r.json()["credential"]

    return do


@pytest.fixture
def platform_node(enroll, platform_token):
    return enroll(platform_token)


@pytest.fixture
def heartbeat(node_client):
    def do(credential: str, **res):
        body = {"agent_version": "t", "resources": resources(**res), "running": []}
        return node_client(credential).post("/node-api/v1/" + protocol.PATH_HEARTBEAT, body, format="json")

    return do
