"""The route × role table in docs/api.md is the one the routes declare; no API route goes undeclared."""

from quotas import permtable
from quotas.access import rule_for, rules_of


def test_docs_api_md_holds_the_table_the_routes_declare():
    text = permtable.docs_path().read_text()
    assert permtable.spliced(text) == text, "docs/api.md's permission table is stale: run `manage.py permtable`"


def test_every_method_of_every_api_route_declares_its_role():
    undeclared = [
        f"{method.upper()} {route}"
        for route, view in permtable.api_routes()
        for method in permtable.served_methods(view)
        if rule_for(rules_of(view), method) is None
    ]
    assert not undeclared, f"routes without an access declaration: {undeclared}"


def test_owner_only_operations_are_owner_only_in_the_table():
    table = {(m, r): cells for m, r, cells in permtable.rows()}
    for method, route in [
        ("PATCH", "/api/v1/project/members/{user_id}"),
        ("DELETE", "/api/v1/project/members/{user_id}"),
        ("POST", "/api/v1/project/invitations"),
        ("POST", "/api/v1/agents/{name}/instances"),
        ("GET", "/api/v1/audit"),
    ]:
        assert table[(method, route)] == ("yes", "no"), (method, route)
    assert "not `base_url`" in table[("PATCH", "/api/v1/agents/{name}/instances/{instance_id}")][1]
    assert "not `auth_header_name`, `auth_header_value`" in table[("PATCH", "/api/v1/agents/{name}")][1]
