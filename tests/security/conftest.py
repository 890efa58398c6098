"""Fixtures for the security tests: a project `alpha` full of objects, and attackers from project `beta`."""

from __future__ import annotations

import pytest
from django.utils import timezone

from nodeagent import protocol

AUTH_SECRET = "Bearer sk-agent-auth-value-7f3e9a"
JOB_ENV_VALUE = "job-env-value-4c1d2b8e"


def enroll_node(token: str, name: str):
    from nodes.services import node_enroll

    req = protocol.EnrollRequest(
        token=token, name=name, resources=protocol.Resources(cpu_milli=4000, memory_bytes=8 << 30)
    )
    return node_enroll(req=req)


@pytest.fixture
def loopback_agents(settings):
    settings.EULER_AGENT_ALLOWED_NETWORKS = ["127.0.0.0/8"]


@pytest.fixture
def loopback_webhooks(settings):
    settings.EULER_WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.0/8"]


@pytest.fixture
def outputs_store(settings, tmp_path):
    settings.STORAGES = {
        **settings.STORAGES,
        "outputs": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(tmp_path / "outputs")},
        },
    }
    settings.EULER_OUTPUTS_BUCKET = ""


def _stored_output(attempt, path: str, data: bytes):
    """A complete output file of the attempt's job, as the node's upload leaves it (tests/outputs does the same)."""
    import hashlib

    from jobs.outputs import store
    from jobs.outputs.models import OutputFile

    key = f"jobs/{attempt.job_id}/{attempt.pk}/{hashlib.sha1(path.encode()).hexdigest()}"
    store.append(key, 0, data)
    return OutputFile.objects.create(job_id=attempt.job_id, attempt=attempt, project_id=attempt.job.project_id,
                                     path=path, size=len(data), sha256=hashlib.sha256(data).hexdigest(),
                                     storage_key=key, received=len(data), complete=True,
                                     completed_at=timezone.now())  # fmt: skip


def _workflows(api, project, job):
    """An array of 3 tasks waiting on `job`, a schedule `chat` with one run, a webhook with one delivery."""
    from workflows.models import Delivery, RunOutcome, ScheduleRun

    body = {"name": "sweep", "image": "euler-test/busybox", "command": ["echo", "hi"], "cpu_milli": 100,
            "memory_bytes": 64 << 20, "timeout_seconds": 60}  # fmt: skip
    r = api.post("/api/v1/jobs", {**body, "array": {"count": 3}, "depends_on": [{"job": job.pk}]}, format="json")
    assert r.status_code == 201, r.json()
    array_id = r.json()["id"]
    r = api.post("/api/v1/schedules", {"name": "chat", "cron": "0 3 * * *", "job": body}, format="json")
    assert r.status_code == 201, r.json()
    schedule_id = r.json()["id"]
    ScheduleRun.objects.create(schedule_id=schedule_id, tick=timezone.now(), job=job, outcome=RunOutcome.SUBMITTED)
    r = api.post("/api/v1/webhooks", {"url": "http://127.0.0.1:9/hook", "events": ["job.ended"]}, format="json")
    assert r.status_code == 201, r.json()
    hook_id = r.json()["id"]
    delivery = Delivery.objects.create(hook_id=hook_id, key="event:1", event_type="job.ended",
                                       payload={"job": job.pk, "secret": JOB_ENV_VALUE},
                                       next_attempt_at=timezone.now())  # fmt: skip
    return {"array_id": array_id, "hook_id": hook_id, "delivery_id": delivery.pk}


@pytest.fixture
def alpha(project, api, make_user, loopback_agents, loopback_webhooks, outputs_store):
    """One of everything in project alpha, made through the same services the API uses."""
    from jobs.models import Attempt, Job, LogChunk
    from nodes.services import enrollment_token_create
    from quotas.invitations import invitation_create
    from quotas.models import Membership, Role
    from quotas.services import apikey_create

    key, _ = apikey_create(project=project, label="victim")
    token, _ = enrollment_token_create(project=project, label="victim")
    _, node_token = enrollment_token_create(project=project, label="for the node")
    node, _ = enroll_node(node_token, "alpha-node")
    invitation = invitation_create(project=project).invitation
    member = make_user("carol")
    Membership.objects.create(project=project, user=member, role=Role.MEMBER)
    r = api.post(
        "/api/v1/agents",
        {
            "name": "chat",
            "auth_header_name": "Authorization",
            "auth_header_value": AUTH_SECRET,
            "instances": [{"base_url": "http://127.0.0.1:9", "weight": 1}],
        },
        format="json",
    )
    assert r.status_code == 201, r.json()
    agent = r.json()
    job = Job.objects.create(
        project=project,
        name="victim",
        image="euler-test/busybox",
        command=["echo", "hi"],
        cpu_milli=100,
        memory_bytes=64 << 20,
        timeout_seconds=60,
        outputs={"paths": ["/out"], "max_bytes": 1 << 30},
        state="running",
        queued_at=timezone.now(),
    )
    attempt = Attempt.objects.create(
        job=job, number=1, node=node, node_name=node.name, cpu_milli=100, memory_bytes=64 << 20, state="running"
    )
    job.current_attempt = attempt
    job.save(update_fields=["current_attempt"])
    LogChunk.objects.create(attempt=attempt, seq=0, offset=0, stream="stdout", data="secret log line\n")
    # Named like the agent's invoke path, so `<path:path>` reaches a real file.
    output = _stored_output(attempt, "v1/chat", b"secret output bytes\n")
    blob, checkpoint = _checkpoint(attempt)
    return {
        **_workflows(api, project, job),
        "file_id": output.pk,
        "output_id": output.pk,
        "key_id": key.pk,
        "token_id": token.pk,
        "node_id": node.pk,
        "invitation_id": invitation.pk,
        "user_id": member.pk,
        "name": agent["name"],
        "instance_id": agent["instances"][0]["id"],
        "job_id": job.pk,
        "attempt_id": attempt.pk,
        "path": "v1/chat",
        "token": "euler_inv_" + "x" * 43,
        "which": "latest",  # a checkpoint: `latest` or its seq
        "checkpoint_id": checkpoint.pk,
        "blob_id": blob.pk,
    }


def _checkpoint(attempt):
    """A committed checkpoint of alpha's job with one blob (rows only: the matrix checks who may touch them)."""
    from jobs.checkpoints.models import Checkpoint, CheckpointBlob

    job = attempt.job
    blob = CheckpointBlob.objects.create(
        job=job, project=job.project, sha256="1" * 64, size=6, storage_key="checkpoints/none", received=6,
        complete=True,
    )  # fmt: skip
    checkpoint = Checkpoint.objects.create(
        job=job, attempt=attempt, attempt_number=attempt.number, project=job.project, seq=1, reason="stop",
        state="committed", size=6, files_count=1, files=[{"path": "step", "sha256": "1" * 64, "size": 6}],
        committed_at=timezone.now(),
    )  # fmt: skip
    return blob, checkpoint
