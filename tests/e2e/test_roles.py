"""Roles black-box, against a real web process: a member's key cannot raise itself, invite owners, or aim the
owner's agent; a removed member's key is refused at once and its open websocket and log stream close."""

from __future__ import annotations

import json
import time

import httpx
import pytest
from django.utils import timezone
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

pytestmark = [pytest.mark.e2e]


@pytest.fixture
def web(platform_factory):
    platform = platform_factory(env={"EULER_AGENT_ALLOWED_NETWORKS": "127.0.0.0/8"}, start=False)
    return platform.start(worker=False, beat=False)


@pytest.fixture
def people(project, owner, make_user):
    from jobs.models import Job
    from quotas.models import Membership, Role
    from quotas.services import apikey_create

    mia = make_user("mia")
    Membership.objects.create(project=project, user=mia, role=Role.MEMBER)
    job = Job.objects.create(
        project=project,
        name="long",
        image="euler-test/busybox",
        command=["sleep", "600"],
        cpu_milli=100,
        memory_bytes=64 << 20,
        timeout_seconds=600,
        state="running",
        queued_at=timezone.now(),
    )
    return {
        "mia": mia,
        "owner_key": apikey_create(project=project, by=owner, label="olivia's")[1],
        "mia_key": apikey_create(project=project, by=mia, label="mia's")[1],
        "job": job,
    }


def call(web, key: str, method: str, path: str, body: dict | None = None) -> httpx.Response:
    return httpx.request(method, web.url + path, json=body, headers={"X-Euler-API-Key": key}, timeout=30)


def test_a_members_key_cannot_raise_itself_invite_owners_or_aim_the_owners_agent(web, people):
    mia_key, owner_key = people["mia_key"], people["owner_key"]
    raised = call(web, mia_key, "PATCH", f"/api/v1/project/members/{people['mia'].pk}", {"role": "owner"})
    assert (raised.status_code, raised.json()["code"]) == (403, "owner_required")
    invited = call(web, mia_key, "POST", "/api/v1/project/invitations", {"role": "owner"})
    assert (invited.status_code, invited.json()["code"]) == (403, "owner_required")
    made = call(web, mia_key, "POST", "/api/v1/api-keys", {"role": "owner"})
    assert (made.status_code, made.json()["code"]) == (403, "role_above_creator")

    agent = {
        "name": "chat",
        "auth_header_name": "Authorization",
        "auth_header_value": "Bearer upstream-secret",
        "instances": [{"base_url": "http://127.0.0.1:9"}],
    }
    assert call(web, owner_key, "POST", "/api/v1/agents", agent).status_code == 201
    instance = call(web, owner_key, "GET", "/api/v1/agents/chat").json()["instances"][0]
    attempts = [
        ("PATCH", f"/api/v1/agents/chat/instances/{instance['id']}", {"base_url": "http://127.0.0.2:9"}),
        ("POST", "/api/v1/agents/chat/instances", {"base_url": "http://127.0.0.3:9"}),
        ("PATCH", "/api/v1/agents/chat", {"auth_header_name": "X-Mine"}),
        ("PATCH", "/api/v1/agents/chat", {"auth_header_value": "Bearer mine"}),
    ]
    for method, path, body in attempts:
        refused = call(web, mia_key, method, path, body)
        assert (refused.status_code, refused.json()["code"]) == (403, "owner_required"), (method, path, body)
    after = call(web, owner_key, "GET", "/api/v1/agents/chat").json()
    assert [i["base_url"] for i in after["instances"]] == ["http://127.0.0.1:9"]
    assert after["auth_header_name"] == "Authorization"
    # What a member may change, they can.
    assert call(web, mia_key, "PATCH", f"/api/v1/agents/chat/instances/{instance['id']}", {"weight": 3}).is_success


def test_a_removed_members_key_is_refused_and_its_streams_close(web, people):
    mia_key, job = people["mia_key"], people["job"]
    assert call(web, mia_key, "GET", "/api/v1/project").status_code == 200
    ws_url = web.url.replace("http://", "ws://") + f"/ws/jobs/{job.pk}/logs/"
    with (
        connect(ws_url, additional_headers={"X-Euler-API-Key": mia_key}, open_timeout=30) as ws,
        httpx.stream(
            "GET",
            f"{web.url}/api/v1/jobs/{job.pk}/logs",
            params={"follow": "1"},
            headers={"X-Euler-API-Key": mia_key},
            timeout=30,
        ) as follow,
    ):
        assert follow.status_code == 200
        removed = call(web, people["owner_key"], "DELETE", f"/api/v1/project/members/{people['mia'].pk}")
        assert removed.status_code == 204
        started = time.monotonic()
        refused = call(web, mia_key, "GET", "/api/v1/project")
        assert (refused.status_code, refused.json()["code"]) == (401, "invalid_api_key")
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                message = json.loads(ws.recv(timeout=30))
                assert message["type"] == "state", message  # nothing but progress before the close
        ws_closed = time.monotonic() - started
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 4401
        assert b"".join(follow.iter_bytes()) == b""  # the follow stream ends too
        follow_closed = time.monotonic() - started
    print(f"\nremoved member: key refused at once; websocket closed after {ws_closed:.2f} s, "
          f"follow stream after {follow_closed:.2f} s")  # fmt: skip
