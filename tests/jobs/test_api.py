"""The jobs API: submit, validation codes, list, detail, cancel, retry, tenancy."""

from __future__ import annotations

import pytest
from django.db import connection

from jobs.models import Job, JobEvent
from jobs.validation import FORBIDDEN_OPTIONS

from .conftest import seed_body

pytestmark = pytest.mark.django_db


def test_it_submits_a_queued_job_with_defaults(api):
    r = api.post("/api/v1/jobs", seed_body(), format="json")
    assert r.status_code == 201
    body = r.json()
    assert body["state"] == "queued"
    assert body["max_retries"] == 1 and body["retry_on"] == ["lost"]
    assert body["pool"] == "any" and body["min_trust"] == "community"
    assert body["attempts"] == [] and body["events"][0]["to_state"] == "queued"
    assert "env" not in body and body["has_env"] is False


def test_disk_bytes_defaults_to_the_setting_and_network_to_the_nodes_policy(api, settings):
    settings.EULER_JOB_DEFAULT_DISK_BYTES = 3 << 30
    body = api.post("/api/v1/jobs", seed_body(), format="json").json()
    assert body["disk_bytes"] == 3 << 30 and body["network"] == "default"
    body = api.post("/api/v1/jobs", seed_body(disk_bytes=64 << 20, network="none"), format="json").json()
    assert body["disk_bytes"] == 64 << 20 and body["network"] == "none"


def test_env_is_write_only_and_encrypted_at_rest(api):
    r = api.post("/api/v1/jobs", seed_body(env={"TOKEN": "s3cret-value"}), format="json")
    assert r.status_code == 201
    assert "s3cret-value" not in r.content.decode()
    assert r.json()["has_env"] is True
    with connection.cursor() as cur:
        cur.execute("SELECT env FROM jobs_job WHERE id = %s", [r.json()["id"]])
        stored = cur.fetchone()[0]
    assert "s3cret" not in stored and stored.startswith("eg1:")
    assert Job.objects.get(pk=r.json()["id"]).env == {"TOKEN": "s3cret-value"}
    detail = api.get(f"/api/v1/jobs/{r.json()['id']}")
    assert "s3cret-value" not in detail.content.decode()


@pytest.mark.parametrize("option", sorted(FORBIDDEN_OPTIONS))
def test_each_forbidden_container_option_is_refused(api, option):
    r = api.post("/api/v1/jobs", seed_body(**{option: True}), format="json")
    assert r.status_code == 400
    assert r.json()["code"] == "forbidden_option"


@pytest.mark.parametrize(
    ("field", "value", "code"),
    [
        ("colour", "red", "unknown_field"),
        ("name", "", "invalid_name"),
        ("name", "x" * 101, "invalid_name"),
        ("image", "Not An Image!", "invalid_image"),
        ("image", "", "invalid_image"),
        ("image", 42, "invalid_image"),
        ("command", [], "invalid_command"),
        ("command", "echo hi", "invalid_command"),
        ("command", ["echo", 3], "invalid_command"),
        ("cpu_milli", 0, "invalid_cpu"),
        ("cpu_milli", "1000", "invalid_cpu"),
        ("cpu_milli", True, "invalid_cpu"),
        ("memory_bytes", 4 * 1024 * 1024 - 1, "invalid_memory"),
        ("disk_bytes", 4 * 1024 * 1024 - 1, "invalid_disk"),
        ("disk_bytes", "10G", "invalid_disk"),
        ("network", "host", "invalid_network"),
        ("network", "bridge", "invalid_network"),
        ("gpu_count", 9, "invalid_gpu_count"),
        ("gpu_count", -1, "invalid_gpu_count"),
        ("timeout_seconds", 0, "invalid_timeout"),
        ("timeout_seconds", 7 * 24 * 3600 + 1, "invalid_timeout"),
        ("env", {"1BAD": "x"}, "invalid_env"),
        ("env", {"OK": 1}, "invalid_env"),
        ("env", {"BIG": "x" * (32 * 1024 + 1)}, "invalid_env"),
        ("env", ["A=1"], "invalid_env"),
        ("region", "no spaces", "invalid_region"),
        ("node_selector", {"k": "bad value"}, "invalid_node_selector"),
        ("max_retries", 11, "invalid_max_retries"),
        ("retry_on", ["sometimes"], "invalid_retry_on"),
        ("pool", "everyone", "invalid_pool"),
        ("min_trust", "untrusted", "invalid_min_trust"),
    ],
)
def test_bad_fields_get_a_400_with_a_stable_code(api, field, value, code):
    r = api.post("/api/v1/jobs", seed_body(**{field: value}), format="json")
    assert r.status_code == 400, r.content
    assert r.json()["code"] == code


def test_a_missing_required_field_is_named(api):
    body = seed_body()
    del body["image"]
    r = api.post("/api/v1/jobs", body, format="json")
    assert r.status_code == 400
    assert r.json()["code"] == "missing_field" and "image" in r.json()["detail"]


@pytest.mark.parametrize("raw", [b"[1, 2]", b'"text"', b"{not json", b"null"])
def test_malformed_bodies_get_a_400_never_a_500(api, raw):
    r = api.generic("POST", "/api/v1/jobs", raw, content_type="application/json")
    assert r.status_code == 400


def test_anonymous_callers_are_refused(anon):
    assert anon.get("/api/v1/jobs").status_code in (401, 403)
    assert anon.post("/api/v1/jobs", seed_body(), format="json").status_code in (401, 403)


def test_it_lists_newest_first_and_filters_by_state(api, submit):
    first, second = submit(name="one"), submit(name="two")
    api.post(f"/api/v1/jobs/{first['id']}/cancel")
    r = api.get("/api/v1/jobs")
    assert [j["name"] for j in r.json()["results"]] == ["two", "one"]
    assert r.json()["count"] == 2
    r = api.get("/api/v1/jobs?state=cancelled")
    assert [j["id"] for j in r.json()["results"]] == [first["id"]]
    assert api.get("/api/v1/jobs?state=bogus").json()["code"] == "invalid_state"
    assert second["state"] == "queued"


def test_another_projects_job_answers_404(api, other_api, submit):
    job = submit()
    assert other_api.get(f"/api/v1/jobs/{job['id']}").status_code == 404
    assert other_api.post(f"/api/v1/jobs/{job['id']}/cancel").status_code == 404
    assert other_api.post(f"/api/v1/jobs/{job['id']}/retry").status_code == 404
    assert other_api.get("/api/v1/jobs").json()["count"] == 0
    assert api.get("/api/v1/jobs/999999").status_code == 404


def test_cancel_of_a_queued_job_is_immediate_and_a_second_cancel_conflicts(api, submit):
    job = submit()
    r = api.post(f"/api/v1/jobs/{job['id']}/cancel")
    assert r.status_code == 200 and r.json()["state"] == "cancelled" and r.json()["reason"] == "cancelled"
    again = api.post(f"/api/v1/jobs/{job['id']}/cancel")
    assert again.status_code == 409 and again.json()["code"] == "invalid_transition"


def test_retry_requeues_an_ended_job_and_refuses_an_active_one(api, submit):
    job = submit()
    r = api.post(f"/api/v1/jobs/{job['id']}/retry")
    assert r.status_code == 409 and r.json()["code"] == "invalid_transition"
    api.post(f"/api/v1/jobs/{job['id']}/cancel")
    r = api.post(f"/api/v1/jobs/{job['id']}/retry")
    assert r.status_code == 200 and r.json()["state"] == "queued"
    moves = list(JobEvent.objects.filter(job_id=job["id"]).values_list("from_state", "to_state"))
    assert moves == [("", "queued"), ("queued", "cancelled"), ("cancelled", "queued")]


def test_the_admin_shows_a_job_without_its_env_and_cancels_through_the_service(submit, make_user, client):
    job = submit(env={"TOKEN": "admin-must-not-see"})
    client.force_login(make_user("root", staff=True))
    page = client.get(f"/admin/jobs/job/{job['id']}/change/")
    assert page.status_code == 200
    assert "admin-must-not-see" not in page.content.decode()
    r = client.post("/admin/jobs/job/", {"action": "cancel", "_selected_action": [job["id"]]})
    assert r.status_code == 302
    assert Job.objects.get(pk=job["id"]).state == "cancelled"
    assert client.get("/admin/jobs/job/").status_code == 200
