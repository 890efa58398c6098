import pytest

from euler.tokens import digest
from quotas.models import ApiKey, Quota

pytestmark = pytest.mark.django_db


def test_it_shows_the_secret_once_and_stores_only_its_hash(api, project):
    created = api.post("/api/v1/api-keys", {"label": "ci"}, format="json")
    assert created.status_code == 201
    secret = created.json()["key"]
    assert secret.startswith("euler_pk_") and len(secret) >= len("euler_pk_") + 43

    row = ApiKey.objects.get(pk=created.json()["id"])
    assert row.key_hash == digest(secret)
    assert secret not in str(ApiKey.objects.filter(pk=row.pk).values().first())

    listed = api.get("/api/v1/api-keys").json()["results"]
    assert all("key" not in item for item in listed)
    assert secret not in str(listed)
    assert any(item["label"] == "ci" for item in listed)


def test_it_authenticates_by_prefix_and_records_last_use(client_for, project):
    from quotas.services import apikey_create

    key, secret = apikey_create(project=project, label="x")
    assert key.last_used_at is None
    response = client_for(secret).get("/api/v1/project")
    assert response.status_code == 200
    assert response.json()["name"] == "alpha"
    key.refresh_from_db()
    assert key.last_used_at is not None


def test_a_revoked_key_is_refused(api, client_for, project):
    created = api.post("/api/v1/api-keys", {}, format="json").json()
    assert api.delete(f"/api/v1/api-keys/{created['id']}").status_code == 204
    response = client_for(created["key"]).get("/api/v1/project")
    assert response.status_code == 401
    assert response.json()["code"] == "invalid_api_key"


@pytest.mark.parametrize(
    "presented",
    [
        "nope",
        "euler_pk_",
        "euler_pk_short",
        "euler_pk_" + "A" * 43,
        "euler_enroll_" + "A" * 43,
        "euler_pk_" + "x" * 600,
    ],
)
def test_each_bad_key_answers_401_invalid_api_key(client_for, project, presented):
    response = client_for(presented).get("/api/v1/project")
    assert response.status_code == 401
    assert response.json() == {"code": "invalid_api_key", "detail": "The API key is unknown or revoked."}


def test_a_key_with_the_right_prefix_but_wrong_secret_is_refused(client_for, api_key):
    tampered = api_key[:-4] + ("AAAA" if not api_key.endswith("AAAA") else "BBBB")
    response = client_for(tampered).get("/api/v1/project")
    assert response.status_code == 401


def test_no_credentials_answers_401(anon):
    response = anon.get("/api/v1/project")
    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"


def test_another_projects_key_answers_404_and_stays_active(api, other_project):
    from quotas.services import apikey_create

    theirs, _ = apikey_create(project=other_project)
    response = api.delete(f"/api/v1/api-keys/{theirs.pk}")
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"
    theirs.refresh_from_db()
    assert theirs.revoked_at is None


def test_the_key_limit_answers_429(api, project):
    Quota.objects.filter(project=project).update(max_api_keys=2)
    assert api.post("/api/v1/api-keys", {}, format="json").status_code == 201
    response = api.post("/api/v1/api-keys", {}, format="json")
    assert response.status_code == 429
    assert response.json()["code"] == "quota_exceeded"


def test_malformed_json_answers_parse_error(api):
    response = api.generic("POST", "/api/v1/api-keys", "{not json", content_type="application/json")
    assert response.status_code == 400
    assert response.json()["code"] == "parse_error"


def test_an_unknown_field_answers_unknown_field(api):
    response = api.post("/api/v1/api-keys", {"label": "a", "scopes": ["all"]}, format="json")
    assert response.status_code == 400
    assert response.json()["code"] == "unknown_field"


def test_a_non_object_body_is_a_clear_400(api):
    response = api.post("/api/v1/api-keys", [1, 2], format="json")
    assert response.status_code == 400
    assert response.json()["code"] == "invalid"


def test_project_shows_quota_and_usage(api):
    body = api.get("/api/v1/project").json()
    assert body["quota"]["max_api_keys"] == 20
    assert body["usage"]["cpu_core_seconds"]["used"] == 0
    assert body["usage"]["api_keys"]["used"] == 1
    assert body["period"]["start"] < body["period"]["end"]


def test_a_session_user_acts_on_their_current_project(client, owner, project):
    client.force_login(owner)
    response = client.get("/api/v1/project")
    assert response.status_code == 200
    assert response.json()["name"] == "alpha"


def test_a_session_user_without_project_gets_404(client, make_user):
    client.force_login(make_user("loner"))
    response = client.get("/api/v1/project")
    assert response.status_code == 404
    assert response.json()["code"] == "no_project"


def test_unknown_api_path_answers_json_404(api):
    response = api.get("/api/v1/does-not-exist")
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"
