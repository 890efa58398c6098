"""Fixtures for checkpoints: the outputs' store and nodes, a job that declares a checkpoint with a current attempt
on the node, and helpers that drive the node protocol by hand."""

from __future__ import annotations

import hashlib

import pytest
from django.utils import timezone

from nodeagent import protocol
from tests.outputs.conftest import (  # noqa: F401 - the outputs' fixtures, used here too
    make_node,
    node_and_credential,
    node_api,
    other_node_and_credential,
    outputs_store,
)
from tests.outputs.test_cli import euler  # noqa: F401 - the outputs' CLI fixture (the `euler` command in-process)

NODE_API = "/node-api/v1/"
SPEC = {"path": "/ckpt", "interval_seconds": 5, "keep_last": 2}


@pytest.fixture
def make_job():
    """A job of `project` declaring a checkpoint, whose current attempt (number `number`) runs on `node`."""

    def make(project, node, *, checkpoint=SPEC, state: str = "running", number: int = 1, job=None):
        from jobs.models import Attempt, Job

        if job is None:
            job = Job.objects.create(
                project=project, name="train", image="euler-test/busybox", command=["true"], cpu_milli=100,
                memory_bytes=64 << 20, timeout_seconds=60, state=state, queued_at=timezone.now(),
                checkpoint=checkpoint,
            )  # fmt: skip
        attempt = Attempt.objects.create(job=job, number=number, node=node, node_name=node.name, cpu_milli=100,
                                         memory_bytes=64 << 20, state="running")  # fmt: skip
        job.current_attempt = attempt
        job.save(update_fields=["current_attempt"])
        return job, attempt

    return make


def entry(path: str, data: bytes) -> dict:
    return {"path": path, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def manifest(client, attempt_id: int, files: list[dict], reason: str = "periodic", **extra):
    url = NODE_API + protocol.PATH_ATTEMPT_CHECKPOINTS.format(attempt_id=attempt_id)
    return client.post(url, {"reason": reason, "files": files, **extra}, format="json")


def blob_url(attempt_id: int, blob_id: int) -> str:
    return NODE_API + protocol.PATH_ATTEMPT_CHECKPOINT_BLOB.format(attempt_id=attempt_id, blob_id=blob_id)


def put_blob(client, attempt_id: int, blob_id: int, data: bytes):
    return client.generic(
        "PUT", blob_url(attempt_id, blob_id), data, content_type="application/octet-stream",
        HTTP_CONTENT_RANGE=f"bytes 0-{len(data) - 1}/{len(data)}",
    )  # fmt: skip


def commit(client, attempt_id: int, checkpoint_id: int):
    url = NODE_API + protocol.PATH_ATTEMPT_CHECKPOINT_COMMIT.format(attempt_id=attempt_id, checkpoint_id=checkpoint_id)
    return client.post(url, {}, format="json")


def restore(client, attempt_id: int):
    return client.get(NODE_API + protocol.PATH_ATTEMPT_CHECKPOINT_RESTORE.format(attempt_id=attempt_id))


def take(client, attempt_id: int, files: dict[str, bytes], reason: str = "periodic") -> protocol.CheckpointPlan:
    """A whole checkpoint by hand: manifest, every blob the plan asks for, commit."""
    reply = manifest(client, attempt_id, [entry(p, d) for p, d in files.items()], reason)
    assert reply.status_code == 200, reply.content
    plan = protocol.CheckpointPlan.model_validate(reply.json())
    by_sha = {hashlib.sha256(d).hexdigest(): d for d in files.values()}
    for upload in plan.uploads:
        assert put_blob(client, attempt_id, upload.blob_id, by_sha[upload.sha256]).status_code == 200
    done = commit(client, attempt_id, plan.checkpoint_id)
    assert done.status_code == 200, done.content
    return plan
