import pytest
from django.test import override_settings

from euler import embedded_redis
from euler import redis as euler_redis

pytestmark = pytest.mark.django_db


def test_healthz_answers_ok(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_readyz_is_ready_with_database_and_redis(client):
    response = client.get("/readyz")
    assert response.status_code == 200, response.content


def test_readyz_names_redis_when_it_is_stopped(client, tmp_path):
    sock = tmp_path / "r.sock"
    proc = embedded_redis.start(sock)
    try:
        with override_settings(REDIS_URL=f"unix://{sock}"):
            euler_redis.client.cache_clear()
            assert client.get("/readyz").status_code == 200
            embedded_redis.stop(proc)
            response = client.get("/readyz")
            assert response.status_code == 503
            body = response.json()
            assert body["code"] == "not_ready"
            assert "redis" in body["failed"] and "database" not in body["failed"]
    finally:
        embedded_redis.stop(proc)
        euler_redis.client.cache_clear()


def test_the_openapi_schema_is_served(client):
    response = client.get("/api/schema/")
    assert response.status_code == 200
    assert b"/api/v1/api-keys" in response.content


def test_the_api_docs_page_uses_no_cdn(client):
    response = client.get("/api/docs/")
    assert response.status_code == 200
    assert b"cdn.jsdelivr" not in response.content and b"unpkg.com" not in response.content
