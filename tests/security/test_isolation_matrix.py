"""Every route that names an object by id or name, called with another project's credentials: 404, nothing changes.

The routes come from the URL resolver, so a new route without an entry in MATRIX fails
`test_every_route_that_takes_an_id_or_a_name_has_a_matrix_entry`.
"""

from __future__ import annotations

import re

import pytest
from channels.testing import WebsocketCommunicator
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from config.routing import websocket_urlpatterns
from tests.security.conftest import enroll_node

pytestmark = pytest.mark.django_db

API, NODE, CONSOLE, WS = "api", "node", "console", "ws"
PATCH_ROLE = {"role": "owner"}

# route -> (who calls it, [(method, body), ...]); every method the route serves that could touch the object.
MATRIX: dict[str, tuple[str, list[tuple[str, dict | None]]]] = {
    "api/v1/api-keys/<id:key_id>": (API, [("delete", None)]),
    "api/v1/project/invitations/<id:invitation_id>": (API, [("delete", None)]),
    "api/v1/project/members/<id:user_id>": (API, [("patch", PATCH_ROLE), ("delete", None)]),
    "api/v1/nodes/enrollment-tokens/<id:token_id>": (API, [("delete", None)]),
    "api/v1/nodes/<id:node_id>": (API, [("get", None)]),
    "api/v1/nodes/<id:node_id>/reclaim": (API, [("post", {}), ("post", {"grace": 1})]),
    "api/v1/nodes/<id:node_id>/resume": (API, [("post", {})]),
    "api/v1/jobs/<id:job_id>": (API, [("get", None)]),
    "api/v1/jobs/<id:job_id>/cancel": (API, [("post", {})]),
    "api/v1/jobs/<id:job_id>/retry": (API, [("post", {})]),
    "api/v1/jobs/<id:job_id>/logs": (API, [("get", None)]),
    "api/v1/jobs/<id:job_id>/wait": (API, [("get", None)]),
    "api/v1/agents/<str:name>": (API, [("get", None), ("patch", {"description": "pwned"}), ("delete", None)]),
    "api/v1/agents/<str:name>/instances": (API, [("get", None), ("post", {"base_url": "http://127.0.0.1:10"})]),
    "api/v1/agents/<str:name>/instances/<id:instance_id>": (
        API,
        [("get", None), ("patch", {"weight": 50}), ("delete", None)],
    ),
    "api/v1/agents/<str:name>/stats": (API, [("get", None)]),
    # Services: alpha's "chat" is an agent's name, so these find no service of alpha's either; the check with a
    # service of another project's is tests/services/test_api.py::test_another_projects_service_answers_404.
    "api/v1/services/<str:name>": (
        API,
        [("get", None), ("patch", {"image": "alpine:3.21"}), ("put", {"name": "chat"}), ("delete", None)],
    ),
    "api/v1/services/<str:name>/scale": (API, [("post", {"replicas": 3})]),
    "api/v1/services/<str:name>/logs": (API, [("get", None)]),
    "api/v1/agents/<str:name>/invoke": (API, [("get", None), ("post", {"q": 1})]),
    "api/v1/agents/<str:name>/invoke/<path:path>": (API, [("get", None), ("post", {"q": 1}), ("delete", None)]),
    "api/v1/arrays/<id:array_id>": (API, [("get", None)]),
    "api/v1/arrays/<id:array_id>/tasks": (API, [("get", None)]),
    "api/v1/arrays/<id:array_id>/cancel": (API, [("post", {}), ("post", {"index": 0})]),
    "api/v1/arrays/<id:array_id>/retry": (API, [("post", {}), ("post", {"index": 0})]),
    "api/v1/jobs/<id:job_id>/outputs": (API, [("get", None)]),
    "api/v1/jobs/<id:job_id>/outputs.tar": (API, [("get", None)]),
    "api/v1/jobs/<id:job_id>/outputs/<path:path>": (API, [("get", None), ("head", None)]),
    "api/v1/jobs/<id:job_id>/checkpoints": (API, [("get", None)]),
    "api/v1/jobs/<id:job_id>/checkpoints/<str:which>/download": (API, [("get", None)]),
    "api/v1/schedules/<str:name>": (API, [("get", None), ("patch", {"enabled": False}), ("delete", None)]),
    "api/v1/schedules/<str:name>/runs": (API, [("get", None)]),
    "api/v1/webhooks/<id:hook_id>": (API, [("get", None), ("delete", None)]),
    "api/v1/webhooks/<id:hook_id>/deliveries": (API, [("get", None)]),
    "api/v1/webhooks/<id:hook_id>/deliveries/<id:delivery_id>/redeliver": (API, [("post", {})]),
    "api/v1/lending/<str:name>/terms": (API, [("get", None), ("put", {"max_job_hours": 1})]),
    # Node protocol: another node's report on alpha's attempt is fenced (409 stale_attempt, "stop it").
    "node-api/v1/attempts/<id:attempt_id>/report": (
        NODE,
        [("post", {"state": "ended", "exit_code": 1, "reason": "exited"})],
    ),
    "node-api/v1/attempts/<id:attempt_id>/logs": (
        NODE,
        [("post", {"chunks": [{"seq": 5, "offset": 0, "stream": "stdout", "data": "forged\n"}]})],
    ),
    "node-api/v1/attempts/<id:attempt_id>/outputs": (
        NODE,
        [("post", {"files": [{"path": "v1/chat", "size": 6, "sha256": "0" * 64}]})],
    ),
    "node-api/v1/attempts/<id:attempt_id>/outputs/<id:file_id>": (NODE, [("get", None), ("put", {})]),
    "node-api/v1/attempts/<id:attempt_id>/outputs/<id:file_id>/done": (NODE, [("post", {})]),
    "node-api/v1/attempts/<id:attempt_id>/inputs/<id:output_id>": (NODE, [("get", None)]),
    "node-api/v1/attempts/<id:attempt_id>/checkpoints": (
        NODE,
        [("post", {"reason": "periodic", "files": [{"path": "step", "size": 6, "sha256": "2" * 64}]})],
    ),
    "node-api/v1/attempts/<id:attempt_id>/checkpoints/<id:checkpoint_id>/commit": (NODE, [("post", {})]),
    "node-api/v1/attempts/<id:attempt_id>/checkpoints/blobs/<id:blob_id>": (NODE, [("get", None), ("put", {})]),
    "node-api/v1/attempts/<id:attempt_id>/checkpoints/blobs/<id:blob_id>/data": (NODE, [("get", None)]),
    "node-api/v1/attempts/<id:attempt_id>/checkpoints/blobs/<id:blob_id>/done": (NODE, [("post", {})]),
    "node-api/v1/attempts/<id:attempt_id>/checkpoints/restore": (NODE, [("get", None)]),
    "keys/<id:key_id>/revoke/": (CONSOLE, [("post", {})]),
    "members/invitations/<id:invitation_id>/revoke/": (CONSOLE, [("post", {})]),
    "members/<id:user_id>/role/": (CONSOLE, [("post", PATCH_ROLE)]),
    "members/<id:user_id>/remove/": (CONSOLE, [("post", {})]),
    "jobs/<id:job_id>/": (CONSOLE, [("get", None)]),
    "jobs/<id:job_id>/cancel/": (CONSOLE, [("post", {})]),
    "jobs/<id:job_id>/retry/": (CONSOLE, [("post", {})]),
    "arrays/<id:array_id>/": (CONSOLE, [("get", None)]),
    "arrays/<id:array_id>/cancel/": (CONSOLE, [("post", {})]),
    "arrays/<id:array_id>/retry/": (CONSOLE, [("post", {})]),
    "schedules/<str:name>/": (CONSOLE, [("get", None)]),
    "schedules/<str:name>/switch/": (CONSOLE, [("post", {"enabled": "0"})]),
    "schedules/<str:name>/delete/": (CONSOLE, [("post", {})]),
    "webhooks/<id:hook_id>/": (CONSOLE, [("get", None)]),
    "webhooks/<id:hook_id>/delete/": (CONSOLE, [("post", {})]),
    "webhooks/<id:hook_id>/deliveries/<id:delivery_id>/redeliver/": (CONSOLE, [("post", {})]),
    "agents/<str:name>/": (CONSOLE, [("get", None)]),
    "lending/<str:name>/terms/": (CONSOLE, [("post", {"max_job_hours": "1"})]),
    "lending/<str:name>/reclaim/": (CONSOLE, [("post", {"grace": "1"}), ("post", {"action": "resume"})]),
    "ws/jobs/<id:job_id>/logs/": (WS, [("connect", None)]),
}
# Addressed by a secret, not by an object of a project: tested in test_rate_limits.py.
NOT_PROJECT_SCOPED = {"join/<str:token>", "join/<str:token>/"}


def _routes(patterns, prefix: str = ""):
    for p in patterns:
        if isinstance(p, URLResolver):
            yield from _routes(p.url_patterns, prefix + str(p.pattern))
        elif isinstance(p, URLPattern):
            yield prefix + str(p.pattern)


def routes_with_ids() -> set[str]:
    everything = set(_routes(get_resolver().url_patterns)) | set(_routes(websocket_urlpatterns))
    return {r for r in everything if "<" in r and not r.startswith(("admin/", "i18n/", "oidc/", "static/"))}


def url(route: str, ids: dict) -> str:
    return "/" + re.sub(r"<(?:\w+:)?(\w+)>", lambda m: str(ids[m.group(1)]), route)


def snapshot(project) -> dict:
    """Every row of alpha's that an attack could change, field by field."""
    from django.db.models import Q

    from agents.models import Agent, AgentInstance
    from jobs.models import Attempt, Job, JobEvent, LogChunk
    from jobs.outputs.models import OutputFile
    from jobs.workflow_models import Dependency, JobArray
    from nodes.models import EnrollmentToken, Node
    from quotas.models import ApiKey, Invitation, Membership
    from workflows.models import Delivery, DeliveryTry, Schedule, ScheduleRun, Webhook

    rows = {
        "jobs": Job.objects.filter(project=project),
        "attempts": Attempt.objects.filter(job__project=project),
        "events": JobEvent.objects.filter(job__project=project),
        "logs": LogChunk.objects.filter(attempt__job__project=project),
        "keys": ApiKey.objects.filter(project=project),
        "tokens": EnrollmentToken.objects.filter(project=project),
        "nodes": Node.objects.filter(owner_project=project),
        "agents": Agent.objects.filter(project=project),
        "instances": AgentInstance.objects.filter(agent__project=project),
        "invitations": Invitation.objects.filter(project=project),
        "members": Membership.objects.filter(project=project),
        "arrays": JobArray.objects.filter(project=project),
        "dependencies": Dependency.objects.filter(Q(job__project=project) | Q(array__project=project)),
        "outputs": OutputFile.objects.filter(project=project),
        "schedules": Schedule.objects.filter(project=project),
        "schedule_runs": ScheduleRun.objects.filter(schedule__project=project),
        "webhooks": Webhook.objects.filter(project=project),
        "deliveries": Delivery.objects.filter(hook__project=project),
        "delivery_tries": DeliveryTry.objects.filter(delivery__hook__project=project),
    }
    return {name: sorted(map(repr, qs.order_by("pk").values())) for name, qs in rows.items()}


def test_every_route_that_takes_an_id_or_a_name_has_a_matrix_entry():
    missing = routes_with_ids() - set(MATRIX) - NOT_PROJECT_SCOPED
    assert not missing, f"add these routes to the isolation MATRIX: {sorted(missing)}"
    stale = set(MATRIX) - routes_with_ids()
    assert not stale, f"these MATRIX routes no longer exist: {sorted(stale)}"


@pytest.fixture
def attackers(other_api, other_project, make_user):
    from nodes.services import enrollment_token_create
    from quotas.models import Membership

    _, token = enrollment_token_create(project=other_project, label="attacker node")
    _, credential = enroll_node(token, "beta-node")
    node_client = Client(HTTP_AUTHORIZATION=f"Bearer {credential}")
    console = Client()
    console.force_login(Membership.objects.filter(project=other_project).first().user)
    return {API: other_api, NODE: node_client, CONSOLE: console}


def _params():
    """The gateway checks keys on a connection of its own: those routes need committed data."""
    for route in sorted(r for r, (who, _) in MATRIX.items() if who != WS):
        marks = [pytest.mark.django_db(transaction=True)] if "/invoke" in route else []
        yield pytest.param(route, marks=marks, id=route)


@pytest.mark.parametrize("route", _params())
def test_another_projects_caller_gets_404_and_changes_nothing(route, alpha, attackers, project):
    who, calls = MATRIX[route]
    client = attackers[who]
    before = snapshot(project)
    for method, body in calls:
        kwargs = {"data": body, "content_type": "application/json"} if body is not None and who != CONSOLE else {}
        if who == CONSOLE and body is not None:
            kwargs = {"data": body}
        response = getattr(client, method)(url(route, alpha), **kwargs)
        if who == CONSOLE and method == "post":
            # Console forms post-redirect-get: back to the list page with a "not found" message, nothing done.
            assert response.status_code in {302, 404}, (method, route, response.status_code)
        else:
            expected = {409} if who == NODE else {404}
            assert response.status_code in expected, (method, route, response.status_code, response.content[:300])
        if who == NODE:
            assert response.json()["code"] == "stale_attempt"
        assert snapshot(project) == before, f"{method} {route} changed alpha's data"


@pytest.mark.django_db(transaction=True)
async def test_another_projects_key_cannot_open_a_jobs_log_websocket(alpha, other_api_key):
    from config.asgi import application

    headers = [(b"origin", b"http://localhost"), (b"host", b"localhost"), (b"x-euler-api-key", other_api_key.encode())]
    ws = WebsocketCommunicator(application, url("ws/jobs/<id:job_id>/logs/", alpha), headers=headers)
    connected, code = await ws.connect()
    if connected:
        closed = await ws.receive_output(timeout=5)
        assert closed["type"] == "websocket.close" and closed["code"] == 4404
    else:
        assert code == 4404
    await ws.disconnect()
