"""Fixtures for node tunnel tests: enrolled nodes with their credentials, and jobs whose current attempt runs on one."""

from __future__ import annotations

import itertools

import pytest
from django.utils import timezone

from nodeagent import protocol

_names = itertools.count(1)


@pytest.fixture
def enrolled(make_user):
    """A node enrolled (and so approved) through a platform token: (node, credential)."""
    from nodes.services import enrollment_token_create, node_enroll

    def make():
        name = f"tun-{next(_names)}"
        staff = make_user(f"ops-{name}", staff=True)
        _, token = enrollment_token_create(trust="platform", by=staff)
        req = protocol.EnrollRequest(
            token=token, name=name, resources=protocol.Resources(cpu_milli=4000, memory_bytes=8 << 30)
        )
        node, credential = node_enroll(req=req)
        return node, credential

    return make


@pytest.fixture
def attempt_on():
    """The current attempt (in `state`) of a new job of `project`, on `node`."""

    def make(project, node, *, state: str = "running"):
        from jobs.models import Attempt, Job

        job = Job.objects.create(
            project=project,
            name="replica",
            image="euler-test/busybox",
            command=["httpd", "-f"],
            cpu_milli=100,
            memory_bytes=64 << 20,
            timeout_seconds=3600,
            state=state if state in ("running", "assigned") else "succeeded",
            queued_at=timezone.now(),
        )
        attempt = Attempt.objects.create(
            job=job, number=1, node=node, node_name=node.name, cpu_milli=100, memory_bytes=64 << 20, state=state
        )
        job.current_attempt = attempt
        job.save(update_fields=["current_attempt"])
        return attempt

    return make
