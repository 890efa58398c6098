"""Every audited action, done the way a user or operator does it, names who did it, and no secret is recorded."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from audit import context
from audit.models import Action, AuditEvent
from nodeagent import protocol
from nodes import services as node_services
from nodes.models import Node
from quotas.models import ApiKey, Membership

pytestmark = pytest.mark.django_db
SIZE = {"cpu_milli": 100, "memory_bytes": 64 << 20, "timeout_seconds": 60}


@pytest.fixture(autouse=True)
def _loopback_agents(settings):
    settings.EULER_AGENT_ALLOWED_NETWORKS = ["127.0.0.0/8"]


@pytest.fixture
def key_actor(project):
    return f"api_key:{ApiKey.objects.get(project=project, label='tests').prefix}"


def last(action: str) -> AuditEvent:
    event = AuditEvent.objects.filter(action=action).order_by("-id").first()
    assert event is not None, f"no {action} event"
    return event


def _enroll(token: str, name: str) -> tuple[Node, str]:
    body = {"token": token, "name": name, "resources": {"cpu_milli": 1000, "memory_bytes": 1 << 30}}
    response = APIClient().post("/node-api/v1/" + protocol.PATH_ENROLL, body, format="json")
    assert response.status_code == 201, response.json()
    return Node.objects.get(name=name), response.json()["credential"]


def test_api_key_created_and_revoked_name_the_calling_key_and_address(api, project, key_actor):
    created = api.post("/api/v1/api-keys", {"label": "ci"}, format="json").json()
    event = last("api_key.created")
    prefix = ApiKey.objects.get(pk=created["id"]).prefix
    assert (event.actor, event.ip, event.project_id) == (key_actor, "127.0.0.1", project.pk)
    assert event.target == f"api_key:{prefix}" and event.details == {"label": "ci", "role": "owner"}
    assert api.delete(f"/api/v1/api-keys/{created['id']}").status_code == 204
    assert last("api_key.revoked").target == f"api_key:{prefix}"
    api.delete(f"/api/v1/api-keys/{created['id']}")  # revoking again changes nothing: no second event
    assert AuditEvent.objects.filter(action="api_key.revoked").count() == 1


def test_invitations_created_used_and_revoked(client, project, owner, make_user):
    client.force_login(owner)
    made = client.post("/api/v1/project/invitations", {"role": "member"}, content_type="application/json").json()
    event = last("invitation.created")
    assert (event.actor, event.target, event.details["role"]) == ("user:olivia", f"invitation:{made['id']}", "member")
    client.force_login(make_user("carol"))
    assert client.post(f"/join/{made['token']}").status_code == 302
    used = last("invitation.used")
    assert (used.actor, used.project_id, used.details["user"]) == ("user:carol", project.pk, "carol")
    client.force_login(owner)
    other = client.post("/api/v1/project/invitations", {}, content_type="application/json").json()
    assert client.delete(f"/api/v1/project/invitations/{other['id']}").status_code == 204
    assert (last("invitation.revoked").target, last("invitation.revoked").actor) == (
        f"invitation:{other['id']}",
        "user:olivia",
    )


def test_member_role_changed_and_member_removed(client, project, owner, make_user):
    mia = make_user("mia")
    Membership.objects.create(project=project, user=mia, role="member")
    client.force_login(owner)
    url = f"/api/v1/project/members/{mia.pk}"
    assert client.patch(url, {"role": "owner"}, content_type="application/json").status_code == 200
    event = last("member.role_changed")
    assert (event.actor, event.target, event.details) == ("user:olivia", "user:mia", {"from": "member", "to": "owner"})
    assert client.delete(url).status_code == 204
    assert (last("member.removed").target, last("member.removed").details) == ("user:mia", {"role": "owner"})


def test_agent_created_changed_and_deleted(api, project, key_actor):
    body = {
        "name": "chat",
        "auth_header_name": "Authorization",
        "auth_header_value": "Bearer sk-agent-secret",
        "instances": [{"base_url": "http://127.0.0.1:9001"}],
    }
    assert api.post("/api/v1/agents", body, format="json").status_code == 201
    created = last("agent.created")
    assert (created.actor, created.target, created.project_id) == (key_actor, "agent:chat", project.pk)
    patch = {"auth_header_value": "Bearer sk-rotated-secret", "description": "x"}
    assert api.patch("/api/v1/agents/chat", patch, format="json").status_code == 200
    assert last("agent.changed").details == {"fields": ["auth_header_value", "description"]}
    added = api.post("/api/v1/agents/chat/instances", {"base_url": "http://127.0.0.1:9002"}, format="json").json()
    assert last("agent.changed").details["instance_added"] == added["id"]
    api.patch(f"/api/v1/agents/chat/instances/{added['id']}", {"weight": 5}, format="json")
    assert last("agent.changed").details == {"instance_changed": added["id"], "fields": ["weight"]}
    api.delete(f"/api/v1/agents/chat/instances/{added['id']}")
    assert last("agent.changed").details == {"instance_removed": added["id"]}
    assert api.delete("/api/v1/agents/chat").status_code == 204
    assert last("agent.deleted").target == "agent:chat"


def test_job_cancelled_and_retried_say_by_whom(client, project, owner):
    client.force_login(owner)
    spec = {
        "name": "hello",
        "image": "alpine:3.20",
        "command": ["echo", "hi"],
        "env": {"TOKEN": "job-env-secret"},
        **SIZE,
    }
    job = client.post("/api/v1/jobs", spec, content_type="application/json").json()
    assert client.post(f"/api/v1/jobs/{job['id']}/cancel").status_code == 200
    event = last("job.cancelled")
    assert (event.actor, event.target, event.project_id) == ("user:olivia", f"job:{job['id']}", project.pk)
    assert client.post(f"/api/v1/jobs/{job['id']}/retry").status_code == 200
    assert (last("job.retried").actor, last("job.retried").target) == ("user:olivia", f"job:{job['id']}")


def test_node_lifecycle_from_token_to_drain(api, project, key_actor, make_user):
    made = api.post("/api/v1/nodes/enrollment-tokens", {"label": "lab"}, format="json").json()
    token_event = last("enrollment_token.created")
    assert (token_event.actor, token_event.target) == (key_actor, f"enrollment_token:{made['id']}")
    node, _credential = _enroll(made["token"], "lab-1")
    enrolled = last("node.enrolled")
    assert (enrolled.actor, enrolled.target, enrolled.project_id) == ("node:lab-1", "node:lab-1", project.pk)
    make_user("ops", staff=True)
    call_command("approvenode", "lab-1", "--trust", "community", "--as", "ops", stdout=io.StringIO())
    assert (last("node.approved").actor, last("node.approved").details["trust"]) == ("user:ops", "community")
    with context.acting("user:ops"):
        node_services.node_set_trust(node=node, trust="untrusted")
        node_services.node_set_public_pool(node=node, public=False)
        node_services.node_rotate_credential(node=node)
        node_services.node_revoke_credential(node=node)
    assert last("node.trust_changed").details == {"from": "community", "to": "untrusted"}
    assert last("node.public_pool_changed").details == {"public_pool": False}
    assert last("node.credential_rotated").actor == last("node.credential_revoked").actor == "user:ops"
    call_command("drainnode", "lab-1", stdout=io.StringIO())
    call_command("drainnode", "lab-1", "--undo", stdout=io.StringIO())
    assert last("node.drained").actor == last("node.undrained").actor == "system"
    call_command("approvenode", "lab-1", "--reject", stdout=io.StringIO())
    assert (last("node.rejected").actor, last("node.rejected").project_id) == ("system", project.pk)
    other = api.post("/api/v1/nodes/enrollment-tokens", {}, format="json").json()
    assert api.delete(f"/api/v1/nodes/enrollment-tokens/{other['id']}").status_code == 204
    assert last("enrollment_token.revoked").target == f"enrollment_token:{other['id']}"


def test_quota_changed_by_command_and_admin(project, make_user, client):
    make_user("ops", staff=True)
    call_command("setquota", "alpha", "--concurrent-jobs", "3", "--as", "ops", stdout=io.StringIO())
    event = last("quota.changed")
    assert (event.actor, event.project_id, event.details) == ("user:ops", project.pk, {"max_concurrent_jobs": 3})
    client.force_login(make_user("root", staff=True))
    quota = project.quota
    form = {
        "project": project.pk,
        "cpu_core_seconds": quota.cpu_core_seconds,
        "gpu_seconds": 99,
        "invocations": quota.invocations,
        "max_concurrent_jobs": 3,
        "max_api_keys": quota.max_api_keys,
        "output_bytes": quota.output_bytes,
        "initial-output_bytes": quota.output_bytes,  # a callable default: the admin posts its initial value too
    }
    for name in ("max_schedules", "schedule_min_period", "schedule_runs_per_minute"):  # callable defaults too
        form[name] = form[f"initial-{name}"] = getattr(quota, name)
    response = client.post(f"/admin/quotas/quota/{quota.pk}/change/", form)
    assert response.status_code == 302, response.content.decode()[:2000]
    event = last("quota.changed")
    assert (event.actor, event.ip, event.details) == ("user:root", "127.0.0.1", {"gpu_seconds": 99})


def test_a_command_as_an_unknown_user_is_refused(project):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="no user named"):
        call_command("setquota", "alpha", "--concurrent-jobs", "3", "--as", "nobody", stdout=io.StringIO())
    assert not AuditEvent.objects.filter(action="quota.changed").exists()


def test_encryption_keys_rotated(settings):
    call_command("rotate_encryption_keys", stdout=io.StringIO())
    event = last("encryption_keys.rotated")
    assert event.actor == "system" and event.project_id is None
    assert set(event.details) == {"key_id", "values"}
    assert event.details["key_id"] == settings.EULER_ENCRYPTION_KEYS.split(":")[0]


def test_sign_in_succeeded_and_failed(client, owner):
    assert client.post("/login/", {"username": "olivia", "password": "wrong-password-xyz"}).status_code == 200
    failed = last("login.failed")
    assert (failed.actor, failed.target, failed.ip, failed.details) == (
        "anonymous",
        "user:olivia",
        "127.0.0.1",
        {"method": "password"},
    )
    assert client.post("/login/", {"username": "olivia", "password": "pw-for-tests"}).status_code == 302
    assert (last("login.succeeded").actor, last("login.succeeded").target) == ("user:olivia", "user:olivia")


def test_every_listed_action_is_known():
    listed = """node.enrolled node.approved node.rejected node.trust_changed node.public_pool_changed node.drained
    node.undrained enrollment_token.created enrollment_token.revoked api_key.created api_key.revoked
    invitation.created invitation.used invitation.revoked member.role_changed member.removed quota.changed
    agent.created agent.changed agent.deleted job.cancelled job.retried encryption_keys.rotated login.succeeded
    login.failed""".split()
    assert set(listed) <= set(Action.values)


def test_no_secret_appears_in_any_event(api, api_key, client, project, owner, make_user):
    secrets = [api_key, "wrong-password-xyz", "pw-for-tests", "sk-agent-secret", "job-env-secret"]
    secrets.append(api.post("/api/v1/api-keys", {"label": "k"}, format="json").json()["key"])
    token = api.post("/api/v1/nodes/enrollment-tokens", {}, format="json").json()["token"]
    secrets.append(token)
    node, credential = _enroll(token, "sec-1")
    secrets.append(credential)
    with context.acting("system"):
        _n, rotated = node_services.node_rotate_credential(node=node)
    secrets.append(rotated)
    invitation = api.post("/api/v1/project/invitations", {}, format="json").json()
    secrets.append(invitation["token"])
    agent = {
        "name": "sec",
        "auth_header_name": "X-Token",
        "auth_header_value": "sk-agent-secret",
        "instances": [{"base_url": "http://user:pw-for-tests@127.0.0.1:9001"}],
    }
    api.post("/api/v1/agents", agent, format="json")
    spec = {"name": "h", "image": "alpine:3.20", "command": ["true"], "env": {"K": "job-env-secret"}, **SIZE}
    job = api.post("/api/v1/jobs", spec, format="json").json()
    api.post(f"/api/v1/jobs/{job['id']}/cancel")
    client.post("/login/", {"username": "olivia", "password": "wrong-password-xyz"})
    client.post("/login/", {"username": "olivia", "password": "pw-for-tests"})
    call_command("rotate_encryption_keys", stdout=io.StringIO())
    dumped = json.dumps(list(AuditEvent.objects.values()), default=str)
    assert AuditEvent.objects.count() >= 10
    for secret in secrets:
        assert secret not in dumped
    assert "euler_pk_" not in dumped and "euler_enroll_" not in dumped and "euler_node_" not in dumped


@pytest.mark.django_db(transaction=True)
async def test_under_asgi_the_calling_api_key_is_the_actor(api_key):
    from asgiref.sync import sync_to_async
    from django.test import AsyncClient

    response = await AsyncClient().post(
        "/api/v1/api-keys", {"label": "async"}, content_type="application/json", headers={"X-Euler-API-Key": api_key}
    )
    assert response.status_code == 201
    event = await sync_to_async(last)("api_key.created")
    caller = await sync_to_async(lambda: ApiKey.objects.get(label="tests").prefix)()
    assert event.actor == f"api_key:{caller}" and event.ip == "127.0.0.1"


def test_a_dev_token_auto_approval_is_recorded_as_system(settings, make_user):
    settings.DEBUG = True
    _, token = node_services.enrollment_token_create(trust="platform", auto_approve=True)
    _enroll(token, "dev-1")
    assert (last("node.enrolled").actor, last("node.approved").actor) == ("node:dev-1", "system")


def test_quota_changed_in_the_projects_admin_page(project, owner, make_user, client):
    client.force_login(make_user("root", staff=True))
    quota, membership = project.quota, Membership.objects.get(project=project)
    form = {
        "name": project.name,
        "slug": project.slug,
        "weight": project.weight,
        "quota-TOTAL_FORMS": "1",
        "quota-INITIAL_FORMS": "1",
        "quota-MIN_NUM_FORMS": "0",
        "quota-MAX_NUM_FORMS": "1",
        "quota-0-id": quota.pk,
        "quota-0-project": project.pk,
        "quota-0-cpu_core_seconds": quota.cpu_core_seconds,
        "quota-0-gpu_seconds": quota.gpu_seconds,
        "quota-0-invocations": 7,
        "quota-0-max_concurrent_jobs": quota.max_concurrent_jobs,
        "quota-0-max_api_keys": quota.max_api_keys,
        "quota-0-output_bytes": quota.output_bytes,
        "initial-quota-0-output_bytes": quota.output_bytes,
        **{
            f"{prefix}quota-0-{name}": getattr(quota, name)
            for name in ("max_schedules", "schedule_min_period", "schedule_runs_per_minute")
            for prefix in ("", "initial-")
        },
        "memberships-TOTAL_FORMS": "1",
        "memberships-INITIAL_FORMS": "1",
        "memberships-MIN_NUM_FORMS": "0",
        "memberships-MAX_NUM_FORMS": "1000",
        "memberships-0-id": membership.pk,
        "memberships-0-project": project.pk,
        "memberships-0-user": owner.pk,
        "memberships-0-role": "owner",
    }
    response = client.post(f"/admin/quotas/project/{project.pk}/change/", form)
    assert response.status_code == 302, response.content.decode()[:3000]
    event = last("quota.changed")
    assert (event.actor, event.project_id, event.details) == ("user:root", project.pk, {"invocations": 7})

    form["weight"] = 2.5
    response = client.post(f"/admin/quotas/project/{project.pk}/change/", form)
    assert response.status_code == 302, response.content.decode()[:3000]
    event = last("quota.changed")
    assert (event.actor, event.project_id, event.details) == ("user:root", project.pk, {"weight": 2.5})
