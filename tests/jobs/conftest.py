"""Fixtures for job tests: nodes made directly in the database, node credentials, a submit helper."""

from __future__ import annotations

import itertools

import pytest
from django.utils import timezone

GIB = 1024**3
_names = itertools.count(1)


def seed_body(**over) -> dict:
    body = {
        "name": "hello",
        "image": "euler-test/busybox",
        "command": ["echo", "hello from Euler"],
        "cpu_milli": 500,
        "memory_bytes": 64 * 1024 * 1024,
        "gpu_count": 0,
        "timeout_seconds": 60,
    }
    body.update(over)
    return body


@pytest.fixture
def make_node(db):
    from nodes.models import Node

    def make(name: str | None = None, *, gpus: int = 0, **over):
        fields = dict(
            name=name or f"node-{next(_names)}",
            trust="platform",
            approval="approved",
            online=True,
            last_heartbeat_at=timezone.now(),
            cpu_milli=4000,
            memory_bytes=8 * GIB,
            gpus=[
                {"uuid": f"GPU-{i}-{next(_names)}", "index": i, "model": "T", "memory_bytes": GIB} for i in range(gpus)
            ],
        )
        fields.update(over)
        return Node.objects.create(**fields)

    return make


@pytest.fixture
def credential_for():
    def make(node) -> str:
        from nodes.services import node_rotate_credential

        _, secret = node_rotate_credential(node=node)
        return secret

    return make


@pytest.fixture
def submit(api):
    def do(client=None, **over):
        r = (client or api).post("/api/v1/jobs", seed_body(**over), format="json")
        assert r.status_code == 201, r.json()
        return r.json()

    return do


@pytest.fixture
def schedule():
    from jobs.scheduling import cycle

    return lambda: cycle.one_pass()
