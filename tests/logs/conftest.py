"""Fixtures for log tests: an enrolled node with its credential and jobs with a current attempt on it."""

from __future__ import annotations

import itertools

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from nodeagent import protocol

_names = itertools.count(1)


def _enroll(make_user, name: str):
    from nodes.services import enrollment_token_create, node_enroll

    staff = make_user(f"ops-{name}", staff=True)
    _, token = enrollment_token_create(trust="platform", by=staff)
    req = protocol.EnrollRequest(
        token=token, name=name, resources=protocol.Resources(cpu_milli=4000, memory_bytes=8 << 30)
    )
    return node_enroll(req=req)


@pytest.fixture
def node_and_credential(make_user):
    return _enroll(make_user, f"logs-n{next(_names)}")


@pytest.fixture
def other_node_and_credential(make_user):
    return _enroll(make_user, f"logs-m{next(_names)}")


@pytest.fixture
def make_job():
    """A job of `project` whose current attempt (number 1, or `number`) runs on `node`."""

    def make(project, node, *, state: str = "running", number: int = 1, job=None):
        from jobs.models import Attempt, Job

        if job is None:
            job = Job.objects.create(
                project=project,
                name="hello",
                image="euler-test/busybox",
                command=["echo", "hi"],
                cpu_milli=100,
                memory_bytes=64 << 20,
                timeout_seconds=60,
                state=state,
                queued_at=timezone.now(),
            )
        attempt = Attempt.objects.create(
            job=job,
            number=number,
            node=node,
            node_name=node.name,
            cpu_milli=100,
            memory_bytes=64 << 20,
            state="running" if state in ("running", "assigned") else state,
        )
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


def chunk(seq: int, data: str, *, offset: int | None = None, stream: str = "stdout") -> dict:
    return {"seq": seq, "offset": seq * 100 if offset is None else offset, "stream": stream, "data": data}


def post_logs(client: APIClient, attempt_id: int, chunks: list[dict] | dict | str):
    body = {"chunks": chunks} if isinstance(chunks, list) else chunks
    url = "/node-api/v1/" + protocol.PATH_ATTEMPT_LOGS.format(attempt_id=attempt_id)
    if isinstance(body, str):
        return client.post(url, body, content_type="application/json")
    return client.post(url, body, format="json")
