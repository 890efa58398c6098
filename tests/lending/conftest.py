"""Fixtures for lending tests: nodes enrolled through a lender's token, attempts ended in the database."""

from __future__ import annotations

import itertools

import pytest
from django.utils import timezone

GIB = 1024**3
_seq = itertools.count(1)


@pytest.fixture
def lent_node(db):
    """A node made in the database as if enrolled with a token `lender` created (for `project`)."""
    from nodes.models import EnrollmentToken, Node

    def make(lender, *, project=None, name: str | None = None, gpus: int = 0, **over):
        n = next(_seq)
        fields = dict(
            name=name or f"lent-{n}",
            trust="untrusted" if project is not None else "platform",
            owner_project=project,
            approval="approved",
            online=True,
            last_heartbeat_at=timezone.now(),
            cpu_milli=8000,
            memory_bytes=16 * GIB,
            approved_cpu_milli=8000,
            approved_memory_bytes=16 * GIB,
            gpus=[{"uuid": f"GPU-{n}-{i}", "index": i, "model": "T", "memory_bytes": GIB} for i in range(gpus)],
        )
        fields.update(over)
        node = Node.objects.create(**fields)
        EnrollmentToken.objects.create(
            project=project,
            lookup=f"lk{n:010d}",
            digest="0" * 64,
            created_by=lender,
            expires_at=timezone.now(),
            used_at=timezone.now(),
            node=node,
        )
        return node

    return make


@pytest.fixture
def make_job(db):
    from jobs.models import Job

    def make(project, **over):
        fields = dict(
            project=project,
            name="j",
            image="euler-test/busybox",
            command=["true"],
            cpu_milli=1000,
            memory_bytes=GIB,
            timeout_seconds=600,
            queued_at=timezone.now(),
            state="running",
        )
        fields.update(over)
        return Job.objects.create(**fields)

    return make


@pytest.fixture
def running_attempt(make_job):
    """A running job and its running attempt on `node`, started `seconds` ago."""
    from datetime import timedelta

    from jobs.models import Attempt, Job

    def make(project, node, *, seconds: float = 100, cpu_milli: int = 2000, gpus: int = 0, **job_over):
        job = make_job(project, cpu_milli=cpu_milli, **job_over)
        attempt = Attempt.objects.create(
            job=job,
            number=1,
            node=node,
            node_name=node.name,
            cpu_milli=cpu_milli,
            memory_bytes=job.memory_bytes,
            disk_bytes=2 * GIB,
            gpu_uuids=[g["uuid"] for g in node.gpus[:gpus]],
            state="running",
            started_at=timezone.now() - timedelta(seconds=seconds),
        )
        Job.objects.filter(pk=job.pk).update(current_attempt=attempt)
        return attempt

    return make


@pytest.fixture
def owner_api(project, owner, client_for):
    """A client with a key the project's owner (olivia) made: the API acts for her."""
    from quotas.services import apikey_create

    _, secret = apikey_create(project=project, by=owner, label="olivia's")
    return client_for(secret)
