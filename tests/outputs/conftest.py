"""Fixtures for outputs: a filesystem store in a temporary directory, an enrolled node (and another) with their
credentials, a job that declares outputs with a current attempt on the node, and helpers to drive the protocol."""

from __future__ import annotations

import hashlib

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from nodeagent import protocol
from tests.jobs.conftest import make_node  # noqa: F401 - the jobs tests' node fixture, used here too
from tests.logs.conftest import node_and_credential, other_node_and_credential  # noqa: F401 - enrolled nodes

NODE_API = "/node-api/v1/"


@pytest.fixture(autouse=True)
def outputs_store(settings, tmp_path):
    settings.STORAGES = {
        **settings.STORAGES,
        "outputs": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(tmp_path / "outputs")},
        },
    }
    settings.EULER_OUTPUTS_BUCKET = ""
    return tmp_path / "outputs"


@pytest.fixture
def make_job():
    """A job of `project` declaring outputs, whose current attempt runs on `node`."""

    def make(project, node, *, outputs=None, inputs_from=None, state: str = "running"):
        from jobs.models import Attempt, Job

        job = Job.objects.create(
            project=project, name="train", image="euler-test/busybox", command=["true"], cpu_milli=100,
            memory_bytes=64 << 20, timeout_seconds=60, state=state, queued_at=timezone.now(),
            outputs=outputs if outputs is not None else {"paths": ["/out"], "max_bytes": 1 << 30},
            inputs_from=inputs_from or [],
        )  # fmt: skip
        attempt = Attempt.objects.create(job=job, number=1, node=node, node_name=node.name, cpu_milli=100,
                                         memory_bytes=64 << 20, state="running")  # fmt: skip
        job.current_attempt = attempt
        job.save(update_fields=["current_attempt"])
        return job, attempt

    return make


@pytest.fixture
def node_api():
    def make(credential: str) -> APIClient:
        c = APIClient()
        c.credentials(HTTP_AUTHORIZATION=f"Bearer {credential}")
        return c

    return make


def entry(path: str, data: bytes) -> dict:
    return {"path": path, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def plan(client, attempt_id: int, files: list[dict], **extra):
    url = NODE_API + protocol.PATH_ATTEMPT_OUTPUTS.format(attempt_id=attempt_id)
    return client.post(url, {"files": files, **extra}, format="json")


def file_url(attempt_id: int, file_id: int) -> str:
    return NODE_API + protocol.PATH_ATTEMPT_OUTPUT_FILE.format(attempt_id=attempt_id, file_id=file_id)


def put_chunk(client, attempt_id: int, file_id: int, data: bytes, start: int, size: int):
    return client.generic(
        "PUT", file_url(attempt_id, file_id), data, content_type="application/octet-stream",
        HTTP_CONTENT_RANGE=f"bytes {start}-{start + len(data) - 1}/{size}",
    )  # fmt: skip


def upload(client, attempt_id: int, file_id: int, data: bytes, chunk: int = protocol.MAX_OUTPUT_CHUNK_BYTES):
    reply = None
    for start in range(0, len(data), chunk):
        reply = put_chunk(client, attempt_id, file_id, data[start : start + chunk], start, len(data))
        assert reply.status_code == 200, reply.content
    return reply
