"""Ids from the URL never reach the database out of range: a huge id is a 404, never a 500."""

import pytest
from django.test import Client

from tests.security.conftest import enroll_node
from tests.security.test_isolation_matrix import CONSOLE, MATRIX, NODE, WS, routes_with_ids, url

pytestmark = pytest.mark.django_db

HUGE = {"1" * 19: "past the converter", str(10**18 - 1): "the largest id let through"}


def test_every_numeric_path_parameter_uses_the_bounded_id_converter():
    assert not [r for r in routes_with_ids() if "<int:" in r]


@pytest.fixture
def clients(api_key, owner, project):
    from nodes.services import enrollment_token_create

    _, token = enrollment_token_create(project=project)
    _, credential = enroll_node(token, "ids-node")
    console = Client()
    console.force_login(owner)
    return {NODE: Client(HTTP_AUTHORIZATION=f"Bearer {credential}"), CONSOLE: console}, Client(
        HTTP_X_EULER_API_KEY=api_key
    )


@pytest.mark.parametrize("value", sorted(HUGE), ids=[HUGE[k] for k in sorted(HUGE)])
@pytest.mark.parametrize("route", sorted(r for r, (who, _) in MATRIX.items() if who != WS and "<id:" in r))
def test_a_huge_id_answers_404_on_every_route(route, value, clients):
    by_kind, api = clients
    who, calls = MATRIX[route]
    client = by_kind.get(who, api)
    ids = {"name": "chat", "path": "x", "which": "latest"} | {
        name: value for name in ("key_id", "invitation_id", "user_id", "token_id", "node_id", "job_id")
    }
    ids |= {"instance_id": value, "attempt_id": value}
    ids |= {
        name: value
        for name in ("array_id", "hook_id", "delivery_id", "file_id", "output_id", "checkpoint_id", "blob_id")
    }
    for method, body in calls:
        kwargs = {"data": body, "content_type": "application/json"} if body is not None and who != CONSOLE else {}
        r = getattr(client, method)(url(route, ids), **kwargs)
        allowed = {302, 404} if who == CONSOLE else ({404, 409} if who == NODE else {404})
        assert r.status_code in allowed, (method, route, r.status_code, r.content[:200])
