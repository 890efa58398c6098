"""GET /api/v1/ledger: a lender's totals as JSON or CSV; another lender's machines never appear."""

from __future__ import annotations

import pytest
from django.db import transaction

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_lenders(project, other_project, owner, make_user, lent_node, running_attempt):
    """The project owner lends one node; another lender ("olga") another. Each ran a job of each project."""
    from jobs import attempts

    olga = make_user("olga")
    mine, theirs = lent_node(owner, name="mine"), lent_node(olga, name="theirs")
    for node in (mine, theirs):
        for p in (project, other_project):
            a = running_attempt(p, node, seconds=10, cpu_milli=1000)
            with transaction.atomic():
                attempts.end_attempt(a.pk, a.job_id, outcome="succeeded", reason="exited", now=a.started_at)
    return mine, theirs


def test_a_lender_sees_the_totals_of_their_own_machines_only(owner_api, two_lenders, owner):
    r = owner_api.get("/api/v1/ledger?group_by=node")
    assert r.status_code == 200, r.content
    rows = r.json()["rows"]
    assert [row["node"] for row in rows] == ["mine"] and rows[0]["attempts"] == 2
    r = owner_api.get("/api/v1/ledger")
    assert [(row["lender"], row["lender_id"]) for row in r.json()["rows"]] == [(owner.username, owner.pk)]


def test_by_project_it_names_only_the_callers_own_projects(owner_api, two_lenders, project):
    rows = owner_api.get("/api/v1/ledger?group_by=project").json()["rows"]
    assert sorted((row["project"], row["project_id"]) for row in rows) == [
        ("(other projects)", None),
        (project.name, project.pk),
    ]


def test_csv_by_query_or_accept_header(owner_api, two_lenders):
    for r in (owner_api.get("/api/v1/ledger?group_by=node&format=csv"), owner_api.get("/api/v1/ledger?group_by=node",
                                                                          HTTP_ACCEPT="text/csv")):  # fmt: skip
        assert r.status_code == 200 and r["Content-Type"].startswith("text/csv")
        header, line = r.content.decode().splitlines()
        assert header.startswith("node,node_id,period,attempts,lost,gpu_faults,run_ms,credited_run_ms")
        assert line.startswith("mine,")


def test_bad_parameters_get_a_400_with_a_code(owner_api):
    for query, code in [
        ("group_by=user", "invalid_group_by"),
        ("period=year", "invalid_period"),
        ("month=2026-13", "invalid_month"),
        ("month=26-1", "invalid_month"),
    ]:
        r = owner_api.get(f"/api/v1/ledger?{query}")
        assert (r.status_code, r.json()["code"]) == (400, code), query


def test_staff_see_every_lender(client_for, two_lenders, make_user, project):
    from quotas.models import Membership
    from quotas.services import apikey_create

    ops = make_user("ops", staff=True)
    Membership.objects.create(project=project, user=ops, role="owner")
    _, key = apikey_create(project=project, by=ops, label="ops")
    rows = client_for(key).get("/api/v1/ledger?group_by=lender").json()["rows"]
    assert sorted(row["lender"] for row in rows) == ["olga", "olivia"]
