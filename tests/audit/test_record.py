"""The audit record function, its append-only rows, and GET /api/v1/audit."""

from datetime import timedelta

import pytest
from django.utils import timezone

import audit
from audit import context
from audit.models import AuditEvent
from audit.services import REDACTED, scrub

pytestmark = pytest.mark.django_db


def test_it_records_the_actor_named_by_the_context(project):
    with context.acting("user:olivia", ip="203.0.113.7"):
        event = audit.record("quota.changed", project=project, target=f"project:{project.name}", details={"a": 1})
    event.refresh_from_db()
    assert (event.actor, event.ip, event.project_id, event.target) == (
        "user:olivia",
        "203.0.113.7",
        project.pk,
        "project:alpha",
    )
    assert event.details == {"a": 1}


def test_it_records_system_outside_any_request(project):
    assert audit.record("job.retried", project=project, target="job:1").actor == "system"


def test_a_real_user_passed_as_by_is_the_actor(project, owner):
    assert audit.record("job.retried", project=project, target="job:1", by=owner).actor == "user:olivia"


def test_it_refuses_an_unknown_action(project):
    with pytest.raises(ValueError):
        audit.record("job.exploded", project=project)


def test_events_are_append_only(project):
    event = audit.record("job.retried", project=project, target="job:1")
    with pytest.raises(TypeError):
        event.save()
    with pytest.raises(TypeError):
        event.delete()
    with pytest.raises(TypeError):
        AuditEvent.objects.filter(pk=event.pk).update(action="job.cancelled")
    with pytest.raises(TypeError):
        AuditEvent.objects.filter(pk=event.pk).delete()
    assert AuditEvent.objects.filter(pk=event.pk).exists()


def test_scrub_redacts_secret_keys_and_secret_looking_values():
    out = scrub(
        {
            "label": "ci",
            "token": "whatever",
            "auth_header_value": "Bearer abc",
            "password": "pw",
            "env": {"A": "b"},
            "note": "made with euler_pk_AbCdEfGh12345678_xyzxyzxyzxyz",
            "nested": [{"secret": 1}, "Bearer zzz"],
            "token_id": 7,
        }
    )
    assert out["label"] == "ci" and out["token_id"] == 7
    assert out["token"] == out["auth_header_value"] == out["password"] == out["env"] == REDACTED
    assert "euler_pk_" not in out["note"] and REDACTED in out["note"]
    assert out["nested"] == [{"secret": REDACTED}, REDACTED]


def test_scrub_removes_credentials_and_queries_from_urls():
    assert scrub("https://bob:hunter2@agent.example.com:8443/v1?key=abc&x=1#top") == (
        f"https://{REDACTED}@agent.example.com:8443/v1?{REDACTED}#top"
    )
    assert scrub("http://127.0.0.1:9001/path") == "http://127.0.0.1:9001/path"


# --- the API -------------------------------------------------------------------------------------


def _at(project, action, when, target="job:1"):
    return AuditEvent.objects.create(action=action, actor="system", project=project, target=target, created_at=when)


def test_the_api_lists_the_projects_events_newest_first(api, project, other_project):
    now = timezone.now()
    _at(project, "job.retried", now - timedelta(hours=2), "job:1")
    _at(project, "job.cancelled", now - timedelta(hours=1), "job:2")
    _at(other_project, "job.cancelled", now, "job:99")
    body = api.get("/api/v1/audit").json()
    assert body["count"] >= 2
    targets = [e["target"] for e in body["results"]]
    assert "job:99" not in targets
    assert targets.index("job:2") < targets.index("job:1")
    assert set(body["results"][0]) == {"id", "created_at", "action", "actor", "ip", "target", "details"}


def test_the_api_filters_by_action_family_and_time(api, project):
    now = timezone.now()
    _at(project, "node.approved", now - timedelta(days=3), "node:a")
    _at(project, "node.drained", now - timedelta(days=1), "node:a")
    _at(project, "job.cancelled", now - timedelta(days=1), "job:2")
    assert [e["action"] for e in api.get("/api/v1/audit?action=node.").json()["results"]] == [
        "node.drained",
        "node.approved",
    ]
    assert [e["action"] for e in api.get("/api/v1/audit?action=job.cancelled").json()["results"]] == ["job.cancelled"]
    since = (now - timedelta(days=2)).isoformat().replace("+00:00", "Z")
    until = (now - timedelta(hours=12)).isoformat().replace("+00:00", "Z")
    got = api.get("/api/v1/audit", {"action": "node.", "since": since, "until": until}).json()["results"]
    assert [e["action"] for e in got] == ["node.drained"]


@pytest.mark.parametrize(
    "query, code",
    [
        ({"action": "job.exploded"}, "invalid_action"),
        ({"action": "nope."}, "invalid_action"),
        ({"since": "yesterday"}, "invalid"),
        ({"since": "2026-01-02T00:00:00Z", "until": "2026-01-01T00:00:00Z"}, "invalid_range"),
    ],
)
def test_bad_filters_answer_400_with_a_code(api, query, code):
    response = api.get("/api/v1/audit", query)
    assert response.status_code == 400
    assert response.json()["code"] == code


def test_a_member_who_is_not_owner_gets_403_and_anonymous_401(client, project, make_user, anon):
    from quotas.models import Membership

    member = make_user("mia")
    Membership.objects.create(project=project, user=member, role="member")
    client.force_login(member)
    response = client.get("/api/v1/audit")
    assert response.status_code == 403 and response.json()["code"] == "owner_required"
    assert anon.get("/api/v1/audit").status_code in (401, 403)


def test_an_owner_session_reads_its_project(client, project, owner):
    _at(project, "job.retried", timezone.now())
    client.force_login(owner)
    assert client.get("/api/v1/audit").json()["count"] == 1


@pytest.mark.parametrize(
    "url, kept",
    [
        ("https://hooks.slack.com/services/T0/B0/tok", "https://hooks.slack.com/[redacted]"),
        ("https://discord.com/api/webhooks/1/tok?wait=1", "https://discord.com/[redacted]"),
        ("https://user:pw@example.com:8443", "https://example.com:8443"),
        ("https://example.com/", "https://example.com"),
        ("http://[::1]:9/x", "http://[::1]:9/[redacted]"),
        ("not a url", REDACTED),
    ],
)
def test_a_url_under_a_url_key_keeps_only_its_origin(url, kept):
    assert scrub({"url": url, "base_url": url})["url"] == kept == scrub({"base_url": url})["base_url"]
