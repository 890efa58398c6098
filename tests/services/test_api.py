"""The services API (services/api) and the controller over the database (services/controller.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from agents.models import Agent, AgentInstance
from audit.models import AuditEvent
from jobs.models import Attempt, Job
from jobs.states import AttemptState, JobState
from jobs.validation import MAX_TIMEOUT
from services import controller
from services.models import Replica, Service

pytestmark = pytest.mark.django_db

SPEC = {
    "name": "chat",
    "image": "alpine:3.20",
    "command": ["httpd", "-f", "-p", "8080"],
    "port": 8080,
    "cpu_milli": 500,
    "memory_bytes": 256 * 2**20,
    "replicas": {"min": 2, "max": 2},
    "readiness": {"path": "/healthz", "interval_seconds": 2, "failures": 2},
}


def create(api, **extra):
    return api.post("/api/v1/services", {**SPEC, **extra}, format="json")


def test_it_creates_a_service_fronted_by_a_managed_agent(api):
    response = create(api, env={"TOKEN": "s3cret"})
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["name"] == "chat" and body["replicas"] == {"min": 2, "max": 2, "current": 2}
    assert body["readiness"]["path"] == "/healthz" and body["invoke_path"] == "/api/v1/agents/chat/invoke/"
    assert body["spec"]["image"] == "alpine:3.20" and body["spec"]["has_env"] is True
    assert "s3cret" not in str(body)
    agent = Agent.objects.get(name="chat")
    assert agent.service_managed and agent.health_path == "/healthz" and agent.health_interval_s == 2
    assert AuditEvent.objects.filter(action="service.created", target="service:chat").exists()
    assert api.get("/api/v1/services").json()["count"] == 1


@pytest.mark.parametrize(
    ("extra", "field", "code"),
    [
        ({"port": 0}, "port", "invalid_port"),
        ({"port": "80"}, "port", "invalid_port"),
        ({"replicas": {"min": 3, "max": 2}}, "replicas", "invalid_replicas"),
        ({"replicas": {"min": 0, "max": 0}}, "replicas", "invalid_replicas"),
        ({"readiness": {"path": "health"}}, "readiness", "invalid_readiness"),
        ({"readiness": {"failures": 0}}, "readiness", "invalid_readiness"),
        ({"target_concurrency": 0}, "target_concurrency", "invalid_target_concurrency"),
        ({"scale_to_zero_after_seconds": 1}, "scale_to_zero_after_seconds", "invalid_scale_to_zero"),
        ({"image": "not a ref"}, "image", "invalid_image"),
        ({"memory_bytes": 1}, "memory_bytes", "invalid_memory"),
        ({"env": {"1BAD": "x"}}, "env", "invalid_env"),
        ({"privileged": True}, "privileged", "forbidden_option"),
        ({"timeout_seconds": 60}, "timeout_seconds", "unknown_field"),
        ({"name": "Bad Name"}, "name", "invalid_name"),
    ],
)
def test_bad_specs_answer_400_with_a_stable_code_and_write_nothing(api, extra, field, code):
    response = create(api, **extra)
    assert response.status_code == 400, response.json()
    assert response.json()["code"] == code
    assert not Service.objects.exists() and not Agent.objects.exists()


def test_scale_to_zero_needs_min_zero(api):
    response = create(api, replicas={"min": 1, "max": 3}, scale_to_zero_after_seconds=60)
    assert response.status_code == 400 and response.json()["code"] == "invalid_replicas"
    assert create(api, replicas={"min": 0, "max": 3}, scale_to_zero_after_seconds=60).status_code == 201


def test_a_name_taken_by_an_agent_or_service_is_409(api):
    assert create(api).status_code == 201
    again = create(api)
    assert again.status_code == 409 and again.json()["code"] == "name_taken"


def test_another_projects_service_answers_404(api, other_api):
    create(api)
    for call in (
        lambda: other_api.get("/api/v1/services/chat"),
        lambda: other_api.patch("/api/v1/services/chat", {"image": "alpine:3.21"}, format="json"),
        lambda: other_api.put("/api/v1/services/chat", SPEC, format="json"),
        lambda: other_api.post("/api/v1/services/chat/scale", {"replicas": 3}, format="json"),
        lambda: other_api.get("/api/v1/services/chat/logs"),
        lambda: other_api.delete("/api/v1/services/chat"),
    ):
        assert call().status_code == 404
    assert other_api.get("/api/v1/services").json()["count"] == 0
    assert api.get("/api/v1/services/chat").status_code == 200


def test_the_agents_api_refuses_to_change_a_services_agent(api):
    create(api)
    for response in (
        api.post("/api/v1/agents/chat/instances", {"base_url": "http://127.0.0.1:1"}, format="json"),
        api.patch("/api/v1/agents/chat", {"description": "x"}, format="json"),
        api.delete("/api/v1/agents/chat"),
    ):
        assert response.status_code == 409 and response.json()["code"] == "managed_by_service"


def test_patch_of_the_image_makes_a_new_revision_and_scaling_does_not(api):
    create(api)
    body = api.patch("/api/v1/services/chat", {"target_concurrency": 4}, format="json").json()
    assert body["revision"] == 1 and body["target_concurrency"] == 4
    body = api.patch("/api/v1/services/chat", {"image": "alpine:3.21"}, format="json").json()
    assert body["revision"] == 2 and body["rollout"] == "rolling" and body["spec"]["image"] == "alpine:3.21"
    assert body["spec"]["command"] == SPEC["command"]
    bad = api.patch("/api/v1/services/chat", {"name": "other"}, format="json")
    assert bad.status_code == 400 and bad.json()["code"] == "invalid_name"
    assert AuditEvent.objects.filter(action="service.changed").count() == 2


def test_scale_sets_the_range_and_is_audited(api):
    create(api)
    body = api.post("/api/v1/services/chat/scale", {"replicas": {"min": 1, "max": 4}}, format="json").json()
    assert body["replicas"] == {"min": 1, "max": 4, "current": 2}
    body = api.post("/api/v1/services/chat/scale", {"replicas": 3}, format="json").json()
    assert body["replicas"] == {"min": 3, "max": 3, "current": 3}
    bad = api.post("/api/v1/services/chat/scale", {"replicas": {"min": 2, "max": 1}}, format="json")
    assert bad.status_code == 400 and bad.json()["code"] == "invalid_replicas"
    assert AuditEvent.objects.filter(action="service.scaled").count() == 2


def _run(job: Job) -> Attempt:
    attempt = Attempt.objects.create(
        job=job, number=1, cpu_milli=job.cpu_milli, memory_bytes=job.memory_bytes, state=AttemptState.RUNNING,
        node_name="n1", container_id="c" * 12,
    )  # fmt: skip
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING, current_attempt=attempt)
    return attempt


def test_the_controller_runs_replicas_as_jobs_and_rotates_them_in_once_ready(api, settings):
    create(api, env={"TOKEN": "s3cret"})
    service = Service.objects.get()
    controller.reconcile_service(service.pk)
    replicas = list(Replica.objects.order_by("id"))
    assert len(replicas) == 2
    job = Job.objects.get(pk=replicas[0].job_id)
    assert job.service_port == 8080 and job.timeout_seconds == MAX_TIMEOUT and job.max_retries == 0
    assert job.env == {"TOKEN": "s3cret"} and job.image == "alpine:3.20" and job.state == JobState.QUEUED

    attempt = _run(job)
    controller.reconcile_service(service.pk)
    replica = Replica.objects.get(pk=replicas[0].pk)
    assert replica.state == "probing" and replica.node_name == "n1"
    instance = AgentInstance.objects.get(pk=replica.instance_id)
    assert instance.base_url == f"euler-node://{attempt.pk}:8080" and instance.health == "unhealthy"

    AgentInstance.objects.filter(pk=instance.pk).update(health="healthy")
    controller.reconcile_service(service.pk)
    assert Replica.objects.get(pk=replica.pk).state == "ready"
    body = api.get("/api/v1/services/chat").json()
    assert body["ready_replicas"] == 1 and {r["state"] for r in body["replica_list"]} == {"ready", "pending"}

    # The job ends on its own (its node was lost): the replica ends, its instance goes, a new one is started.
    Job.objects.filter(pk=job.pk).update(state=JobState.LOST)
    Attempt.objects.filter(pk=attempt.pk).update(state=AttemptState.LOST)
    controller.reconcile_service(service.pk)
    assert Replica.objects.get(pk=replica.pk).state == "ended"
    assert not AgentInstance.objects.filter(pk=instance.pk).exists()
    assert Replica.objects.exclude(state="ended").count() == 2
    assert service.events.filter(kind="replica_failed").exists()


def test_a_replica_leaves_the_rotation_before_its_job_is_cancelled(api, settings):
    settings.EULER_SERVICE_DRAIN_SECONDS = 10
    create(api, replicas={"min": 1, "max": 1})
    service = Service.objects.get()
    controller.reconcile_service(service.pk)
    replica = Replica.objects.get()
    _run(replica.job)
    controller.reconcile_service(service.pk)
    replica.refresh_from_db()
    AgentInstance.objects.filter(pk=replica.instance_id).update(health="healthy")
    controller.reconcile_service(service.pk)

    assert api.delete("/api/v1/services/chat").status_code == 202
    assert api.get("/api/v1/services/chat").status_code == 404
    now = timezone.now()
    controller.reconcile_service(service.pk, now=now)
    replica.refresh_from_db()
    assert replica.state == "draining" and not AgentInstance.objects.get(pk=replica.instance_id).enabled
    assert Job.objects.get(pk=replica.job_id).state == JobState.RUNNING  # still serving calls in flight
    controller.reconcile_service(service.pk, now=now + timedelta(seconds=5))
    assert Job.objects.get(pk=replica.job_id).state == JobState.RUNNING
    controller.reconcile_service(service.pk, now=now + timedelta(seconds=11))
    replica.refresh_from_db()
    assert replica.state == "stopping" and Job.objects.get(pk=replica.job_id).state == JobState.CANCELLED
    Attempt.objects.filter(job_id=replica.job_id).update(state=AttemptState.CANCELLED)
    controller.reconcile_service(service.pk, now=now + timedelta(seconds=12))
    controller.reconcile_service(service.pk, now=now + timedelta(seconds=13))
    assert not Service.objects.exists() and not Agent.objects.filter(name="chat").exists()
    assert AuditEvent.objects.filter(action="service.deleted").exists()


def test_logs_show_each_replicas_tail(api):
    create(api, replicas={"min": 1, "max": 1})
    controller.reconcile_service(Service.objects.get().pk)
    response = api.get("/api/v1/services/chat/logs")
    assert response.status_code == 200 and "==> replica" in response.content.decode()
    assert api.get("/api/v1/services/chat/logs?replica=999999").status_code == 404
    assert api.get("/api/v1/services/chat/logs?replica=abc").status_code == 404
