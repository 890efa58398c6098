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
def alpha(project, api, make_user, loopback_agents):
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
        state="running",
        queued_at=timezone.now(),
    )
    attempt = Attempt.objects.create(
        job=job, number=1, node=node, node_name=node.name, cpu_milli=100, memory_bytes=64 << 20, state="running"
    )
    job.current_attempt = attempt
    job.save(update_fields=["current_attempt"])
    LogChunk.objects.create(attempt=attempt, seq=0, offset=0, stream="stdout", data="secret log line\n")
    return {
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
    }
