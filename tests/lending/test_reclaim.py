"""A lender takes the machine back (nodes/reclaim.py): POST /api/v1/nodes/{id}/reclaim and /resume, the node's own
`euler-node reclaim`, who may lift a reclaim, and what a reclaimed node is (no placements, its jobs requeued)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from nodeagent import protocol
from nodes import reclaim

pytestmark = pytest.mark.django_db


def test_who_may_lift_a_reclaim_is_whoever_made_it_or_someone_above():
    assert reclaim.may_resume(reclaimed_by="node", authority="node")
    assert reclaim.may_resume(reclaimed_by="node", authority="lender")
    assert not reclaim.may_resume(reclaimed_by="lender", authority="node")
    assert not reclaim.may_resume(reclaimed_by="operator", authority="lender")
    assert reclaim.may_resume(reclaimed_by="operator", authority="operator")
    assert not reclaim.may_resume(reclaimed_by="", authority="lender")  # unknown: the operator's


def test_a_second_reclaim_by_someone_above_raises_who_must_resume():
    assert reclaim.kept_authority(reclaimed_by="node", authority="operator") == "operator"
    assert reclaim.kept_authority(reclaimed_by="operator", authority="node") == "operator"
    assert reclaim.kept_authority(reclaimed_by="", authority="lender") == "lender"


@pytest.fixture
def staff_api(make_user, project, client_for):
    from quotas.services import apikey_create, project_create

    root = make_user("root", staff=True)
    _, secret = apikey_create(project=project_create(name="ops", owner=root), by=root, label="ops")
    return client_for(secret)


def _node_api(node) -> APIClient:
    from nodes.services import node_rotate_credential

    _, secret = node_rotate_credential(node=node)
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return c


def test_the_lender_reclaims_their_machine_and_its_running_jobs_are_asked_to_stop_with_the_grace(
    owner, owner_api, project, lent_node, running_attempt
):
    from audit.models import AuditEvent
    from jobs.models import Attempt
    from nodes.models import Node, NodeEvent

    node = lent_node(owner)
    attempt = running_attempt(project, node, stop_grace_seconds=40)
    r = owner_api.post(f"/api/v1/nodes/{node.pk}/reclaim", {"grace": 5}, format="json")
    assert r.status_code == 200, r.content
    body = r.json()
    assert (body["reclaimed"], body["reclaimed_by"], body["reclaim_count"], body["stopped"]) == (True, "lender", 1, 1)
    row = Attempt.objects.get(pk=attempt.pk)
    assert (row.state, row.stop_reason, row.stop_grace, row.stop_requeue) == ("running", "reclaim", 5, True)
    assert "olivia" in row.stop_by
    node.refresh_from_db()
    assert node.reclaimed_at is not None and node.reclaim_count == 1
    assert NodeEvent.objects.filter(node=node, kind="reclaimed").exists()
    assert AuditEvent.objects.filter(action="node.reclaimed", target=f"node:{node.name}").exists()
    # Without a grace: each job's own.
    owner_api.post(f"/api/v1/nodes/{node.pk}/resume")
    other = running_attempt(project, node, stop_grace_seconds=40)
    assert owner_api.post(f"/api/v1/nodes/{node.pk}/reclaim").json()["stopped"] == 1
    assert Attempt.objects.get(pk=other.pk).stop_grace == 40
    assert Node.objects.get(pk=node.pk).reclaim_count == 2


def test_a_reclaimed_node_gets_no_new_work_until_resumed(owner, owner_api, project, lent_node, api):
    from jobs.models import Job
    from jobs.scheduling.cycle import one_pass as run_cycle

    from ..jobs.conftest import seed_body

    node = lent_node(owner, project=project)
    assert owner_api.post(f"/api/v1/nodes/{node.pk}/reclaim").status_code == 200
    job_id = api.post("/api/v1/jobs", seed_body(pool="own"), format="json").json()["id"]
    run_cycle()
    assert Job.objects.get(pk=job_id).state == "queued"
    r = owner_api.post(f"/api/v1/nodes/{node.pk}/resume")
    assert r.status_code == 200 and r.json()["reclaimed"] is False
    run_cycle()
    assert Job.objects.get(pk=job_id).state == "assigned"


def test_someone_who_did_not_lend_the_machine_gets_404(owner, lent_node, make_user, project, client_for, api):
    from quotas.services import apikey_create, project_create

    node = lent_node(owner)
    mallory = make_user("mallory")
    _, secret = apikey_create(project=project_create(name="gamma", owner=mallory), by=mallory, label="m")
    stranger = client_for(secret)
    for path in (f"/api/v1/nodes/{node.pk}/reclaim", f"/api/v1/nodes/{node.pk}/resume", "/api/v1/nodes/999999/reclaim"):
        assert stranger.post(path).status_code == 404
        assert api.post(path).status_code == 404  # an operator's key made by nobody: no lender, no staff
    node.refresh_from_db()
    assert node.reclaimed_at is None


def test_the_operators_reclaim_is_lifted_only_by_the_operator(owner, owner_api, staff_api, lent_node):
    node = lent_node(owner)
    assert staff_api.post(f"/api/v1/nodes/{node.pk}/reclaim").json()["reclaimed_by"] == "operator"
    r = owner_api.post(f"/api/v1/nodes/{node.pk}/resume")
    assert r.status_code == 409 and r.json()["code"] == "reclaimed_by_higher"
    assert staff_api.post(f"/api/v1/nodes/{node.pk}/resume").json()["reclaimed"] is False


def test_a_bad_grace_is_refused_and_nothing_changes(owner, owner_api, lent_node, settings):
    settings.EULER_MAX_STOP_GRACE = 60
    node = lent_node(owner)
    for body in ({"grace": 61}, {"grace": -1}, {"grace": "soon"}, {"grace": True}, {"when": 1}):
        r = owner_api.post(f"/api/v1/nodes/{node.pk}/reclaim", body, format="json")
        assert r.status_code == 400, (body, r.content)
        assert r.json()["code"] in ("invalid_grace", "unknown_field", "invalid"), r.json()
    node.refresh_from_db()
    assert node.reclaimed_at is None and node.reclaim_count == 0


def test_the_node_reclaims_itself_and_resumes_its_own_reclaim(owner, lent_node, project, running_attempt):
    from audit.models import AuditEvent

    node = lent_node(owner)
    running_attempt(project, node)
    client = _node_api(node)
    r = client.post("/node-api/v1/" + protocol.PATH_RECLAIM, {"grace": 3}, format="json")
    assert r.status_code == 200, r.content
    assert (r.json()["reclaimed_by"], r.json()["stopped"]) == ("node", 1)
    assert AuditEvent.objects.filter(action="node.reclaimed", actor=f"node:{node.name}").exists()
    r = client.post("/node-api/v1/" + protocol.PATH_RESUME, {}, format="json")
    assert r.status_code == 200 and r.json()["reclaimed"] is False


def test_a_nodes_own_requests_cannot_lift_its_lenders_reclaim(owner, owner_api, lent_node):
    from nodes.models import Node

    node = lent_node(owner)
    assert owner_api.post(f"/api/v1/nodes/{node.pk}/reclaim").status_code == 200
    client = _node_api(node)
    r = client.post("/node-api/v1/" + protocol.PATH_RESUME, {}, format="json")
    assert r.status_code == 409 and r.json()["code"] == "reclaimed_by_higher"
    # A reclaim of its own on top does not lower who must resume, and the public API does not take its credential.
    assert client.post("/node-api/v1/" + protocol.PATH_RECLAIM, {}, format="json").json()["reclaimed_by"] == "lender"
    assert client.post("/node-api/v1/" + protocol.PATH_RESUME, {}, format="json").status_code == 409
    assert client.post(f"/api/v1/nodes/{node.pk}/resume").status_code in (401, 403)
    row = Node.objects.get(pk=node.pk)
    assert (row.reclaimed_at is not None, row.reclaimed_by) == (True, "lender")
