"""Every API route × every kind of caller, from the URL resolver, against the routes' own declarations.

Callers: an owner's key, a member's key, a member's session, a removed member's key, a revoked key, and
another project's key. Expected: 401 for the dead keys, 404 for another project's objects, 403 with
`owner_required` where the declared table (the one in docs/api.md) says "no" or names an owner-only field
the call sends, and otherwise anything but 401/403. A refusal changes nothing.
"""

from __future__ import annotations

import pytest
from django.test import Client

from quotas import permtable
from quotas.access import cell, rule_for, rules_of
from tests.security.test_isolation_matrix import snapshot, url

pytestmark = pytest.mark.django_db

OTHER, REVOKED, REMOVED, MEMBER_SESSION, MEMBER_KEY, OWNER_KEY = (
    "another project's key",
    "revoked key",
    "removed member's key",
    "member session",
    "member key",
    "owner key",
)
CALLERS = (OTHER, REVOKED, REMOVED, MEMBER_SESSION, MEMBER_KEY, OWNER_KEY)  # refusals first: no one deletes early

BODIES = {
    ("post", "api/v1/agents"): {"name": "another"},
    ("patch", "api/v1/agents/<str:name>"): {"description": "x", "auth_header_name": "X-Leak", "auth_header_value": "v"},
    ("post", "api/v1/agents/<str:name>/instances"): {"base_url": "http://127.0.0.1:11"},
    ("patch", "api/v1/agents/<str:name>/instances/<id:instance_id>"): {"base_url": "http://127.0.0.1:12"},
    ("post", "api/v1/api-keys"): {"label": "made in the matrix"},
    ("post", "api/v1/project/invitations"): {"role": "owner"},
    ("patch", "api/v1/project/members/<id:user_id>"): {"role": "owner"},  # the member's own role
    ("post", "api/v1/nodes/enrollment-tokens"): {"label": "m"},
}
# Query strings of the GETs that would otherwise wait: the blocking read answers at once with timeout 0.
QUERIES = {("get", "api/v1/jobs/<id:job_id>/wait"): {"timeout": "0"}}
# Rules the table states in words and the object decides: the key at {key_id} is not the member's own, nor is
# the schedule `chat` (the owner's key made it: "only schedules they created").
OWNER_FOR_OTHERS_OBJECTS = {
    ("delete", "api/v1/api-keys/<id:key_id>"),
    ("patch", "api/v1/schedules/<str:name>"),
    ("delete", "api/v1/schedules/<str:name>"),
}


def _cases():
    for route, view in permtable.api_routes():
        for method in permtable.served_methods(view):
            marks = [pytest.mark.django_db(transaction=True)] if "/invoke" in route else []
            yield pytest.param(route, method, marks=marks, id=f"{method.upper()} {route}")


def expected(route: str, method: str, caller: str, body: dict | None) -> int | None:
    """The status a caller must get, or None for "allowed" (anything but 401 and 403)."""
    if caller in (REVOKED, REMOVED):
        return 401
    if caller == OTHER:
        return 404 if "<" in route else None
    role = "owner" if caller == OWNER_KEY else "member"
    rule = rule_for(rules_of(dict(permtable.api_routes())[route]), method)
    verdict = cell(rule, role)
    if verdict == "no":
        return 403
    if rule.owner_fields and role != "owner" and set(body or {}) & rule.owner_fields:
        return 403
    if (method, route) in OWNER_FOR_OTHERS_OBJECTS and role != "owner":
        return 403
    return None


@pytest.fixture
def callers(alpha, project, owner, other_api_key, make_user, client_for):
    from django.contrib.auth import get_user_model

    from quotas import members
    from quotas.models import Membership, Role
    from quotas.services import apikey_create, apikey_revoke

    carol = get_user_model().objects.get(username="carol")  # alpha's member
    _, owner_key = apikey_create(project=project, by=owner, label="owner's")
    _, member_key = apikey_create(project=project, by=carol, label="carol's")
    revoked, revoked_key = apikey_create(project=project, by=owner, label="revoked")
    apikey_revoke(project=project, key_id=revoked.pk)
    rex = make_user("rex")
    Membership.objects.create(project=project, user=rex, role=Role.MEMBER)
    _, removed_key = apikey_create(project=project, by=rex, label="rex's")
    members.member_remove(project=project, user_id=rex.pk)
    session = Client()
    session.force_login(carol)
    made = {
        OTHER: client_for(other_api_key),
        REVOKED: client_for(revoked_key),
        REMOVED: client_for(removed_key),
        MEMBER_SESSION: session,
        MEMBER_KEY: client_for(member_key),
        OWNER_KEY: client_for(owner_key),
    }
    for caller in made.values():  # first use stamps last_used_at: do it before anyone takes a snapshot
        caller.get("/api/v1/project")
    return made


@pytest.mark.parametrize(("route", "method"), list(_cases()))
def test_each_caller_gets_what_the_declared_table_says(route, method, alpha, callers, project):
    body = BODIES.get((method, route))
    for caller in CALLERS:
        client = callers[caller]
        want = expected(route, method, caller, body)
        before = snapshot(project)
        kwargs = {"data": body, "content_type": "application/json"} if body is not None else {}
        if method in ("post", "patch") and body is None:
            kwargs = {"data": {}, "content_type": "application/json"}
        if (method, route) in QUERIES:
            kwargs = {"data": QUERIES[(method, route)]}
        response = getattr(client, method)(url(route, alpha), **kwargs)
        got = response.status_code
        content = b"(streamed)" if response.streaming else response.content[:200]
        where = (method.upper(), route, caller, got, content)
        if want is None:
            assert got not in (401, 403), where
            continue
        assert got == want, where
        if want == 403:
            assert response.json()["code"] == "owner_required", where
        if want == 401:
            assert response.json()["code"] == "invalid_api_key", where
        assert snapshot(project) == before, f"a refused call changed data: {where}"
