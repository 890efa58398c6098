import pytest
from django.db import connection

from agents.models import Agent

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _loopback_allowed(settings):
    settings.EULER_AGENT_ALLOWED_NETWORKS = ["127.0.0.0/8"]


def create(api, **extra):
    body = {"name": "chat", "instances": [{"base_url": "http://127.0.0.1:9001", "weight": 3}], **extra}
    return api.post("/api/v1/agents", body, format="json")


def test_it_registers_an_agent_with_instances_and_shows_their_health(api):
    response = create(api, description="a chat bot")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["name"] == "chat" and body["health_path"] == "/health"
    assert body["instances"][0]["base_url"] == "http://127.0.0.1:9001"
    assert body["instances"][0]["weight"] == 3
    assert body["instances"][0]["health"] == "unknown"
    assert api.get("/api/v1/agents/chat").json()["description"] == "a chat bot"


def test_the_auth_header_value_is_write_only_and_encrypted_at_rest(api):
    create(api, auth_header_name="Authorization", auth_header_value="Bearer sk-very-secret")
    shown = api.get("/api/v1/agents/chat").json()
    assert shown["has_auth_header"] is True
    assert "sk-very-secret" not in str(shown)
    with connection.cursor() as cursor:
        cursor.execute("SELECT auth_header_value FROM agents_agent")
        stored = cursor.fetchone()[0]
    assert "sk-very-secret" not in stored and stored.startswith("eg1:")
    assert Agent.objects.get().auth_header_value == "Bearer sk-very-secret"


def test_a_name_is_unique_per_project_only(api, other_api):
    assert create(api).status_code == 201
    again = create(api)
    assert again.status_code == 409 and again.json()["code"] == "name_taken"
    assert create(other_api).status_code == 201


def test_another_projects_agent_answers_404(api, other_api):
    create(api)
    assert other_api.get("/api/v1/agents/chat").status_code == 404
    assert other_api.patch("/api/v1/agents/chat", {"description": "x"}, format="json").status_code == 404
    assert other_api.delete("/api/v1/agents/chat").status_code == 404
    assert other_api.get("/api/v1/agents/chat/instances").status_code == 404
    assert other_api.get("/api/v1/agents").json()["count"] == 0


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"name": "Bad Name"}, "invalid_name"),
        ({"name": "ok", "privileged": True}, "unknown_field"),
        ({"name": "ok", "instances": [{"base_url": "http://127.0.0.1", "weight": 0}]}, "min_value"),
        ({"name": "ok", "instances": [{"base_url": "http://127.0.0.1", "weight": 1001}]}, "max_value"),
        ({"name": "ok", "instances": [{"base_url": "http://127.0.0.1", "port": 1}]}, "unknown_field"),
        ({"name": "ok", "health_path": "health"}, "invalid_path"),
        ({"name": "ok", "auth_header_name": "Host", "auth_header_value": "x"}, "invalid_header"),
        ({"name": "ok", "auth_header_name": "X-Key", "auth_header_value": "a\r\nb"}, "invalid_header"),
        ({"name": "ok", "auth_header_name": "X-Key"}, "invalid_header"),
        ({"name": "ok", "health_interval_s": 0}, "min_value"),
    ],
)
def test_bad_input_answers_400_with_a_stable_code(api, body, code):
    response = api.post("/api/v1/agents", body, format="json")
    assert response.status_code == 400
    assert response.json()["code"] == code
    assert Agent.objects.count() == 0


def test_patch_changes_settings_and_clears_the_auth_header(api):
    create(api, auth_header_name="X-Key", auth_header_value="s3cret")
    response = api.patch("/api/v1/agents/chat", {"health_interval_s": 30, "auth_header_value": None}, format="json")
    assert response.status_code == 200
    assert response.json()["health_interval_s"] == 30
    assert response.json()["has_auth_header"] is False
    assert Agent.objects.get().auth_header_value is None


def test_instances_are_added_changed_and_removed(api):
    create(api)
    added = api.post("/api/v1/agents/chat/instances", {"base_url": "http://127.0.0.2:9002/"}, format="json")
    assert added.status_code == 201
    instance_id = added.json()["id"]
    assert added.json()["base_url"] == "http://127.0.0.2:9002"
    changed = api.patch(f"/api/v1/agents/chat/instances/{instance_id}", {"weight": 7, "enabled": False}, format="json")
    assert changed.json()["weight"] == 7 and changed.json()["enabled"] is False
    assert len(api.get("/api/v1/agents/chat/instances").json()) == 2
    assert api.delete(f"/api/v1/agents/chat/instances/{instance_id}").status_code == 204
    assert api.get(f"/api/v1/agents/chat/instances/{instance_id}").status_code == 404


def test_an_instance_url_change_is_ssrf_checked_too(api, settings):
    created = create(api).json()
    settings.EULER_AGENT_ALLOWED_NETWORKS = []
    instance_id = created["instances"][0]["id"]
    response = api.patch(
        f"/api/v1/agents/chat/instances/{instance_id}", {"base_url": "http://169.254.169.254"}, format="json"
    )
    assert response.status_code == 400 and response.json()["code"] == "forbidden_address"


def test_delete_removes_the_agent(api):
    create(api)
    assert api.delete("/api/v1/agents/chat").status_code == 204
    assert api.get("/api/v1/agents/chat").status_code == 404


def test_anonymous_callers_are_refused(anon):
    assert anon.get("/api/v1/agents").status_code in (401, 403)
