"""After a run that makes every kind of secret, neither the database, a dump, the logs nor the admin shows one."""

from __future__ import annotations

import io
import logging

import pytest
from django.contrib import admin
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.urls import reverse

from euler.tokens import LOOKUP_LEN
from tests.security.conftest import AUTH_SECRET, JOB_ENV_VALUE

pytestmark = pytest.mark.django_db

PREFIXES = ("euler_pk_", "euler_enroll_", "euler_node_", "euler_inv_")


def hidden_part(secret: str) -> str:
    """What must never be stored: everything after the kind prefix and the clear lookup characters."""
    for prefix in PREFIXES:
        if secret.startswith(prefix):
            return secret[len(prefix) + LOOKUP_LEN :]
    return secret


@pytest.fixture
def secrets_made(api, loopback_agents, caplog):
    """Drive the API and the node protocol the way users and agents do; collect every secret handed out.

    Logs are captured at DEBUG with SQL logging on, so a secret that reached a query in clear shows too."""
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="django")
    caplog.set_level(logging.DEBUG, logger="django.db.backends")
    connection.force_debug_cursor = True
    made = {}
    r = api.post("/api/v1/api-keys", {"label": "ci"}, format="json")
    assert r.status_code == 201, r.json()
    made["api key"] = r.json()["key"] if "key" in r.json() else r.json()["secret"]
    r = api.post("/api/v1/nodes/enrollment-tokens", {"label": "rack 1"}, format="json")
    assert r.status_code == 201, r.json()
    made["enrollment token"] = r.json()["token"]
    body = {
        "token": made["enrollment token"],
        "name": "gpu-box",
        "hostname": "gpu-box",
        "resources": {"cpu_milli": 4000, "memory_bytes": 8 << 30, "gpus": [], "docker_version": "27.0"},
    }
    r = Client().post("/node-api/v1/enroll", body, content_type="application/json")
    assert r.status_code == 201, r.json()
    made["node credential"] = r.json()["credential"]
    r = api.post("/api/v1/project/invitations", {"role": "member"}, format="json")
    assert r.status_code == 201, r.json()
    made["invitation"] = r.json()["token"]
    job = {
        "name": "with-secrets",
        "image": "euler-test/busybox",
        "command": ["sh", "-c", "echo $DB_PASSWORD"],
        "env": {"DB_PASSWORD": JOB_ENV_VALUE},
        "cpu_milli": 100,
        "memory_bytes": 64 << 20,
        "timeout_seconds": 60,
    }
    r = api.post("/api/v1/jobs", job, format="json")
    assert r.status_code == 201, r.json()
    made["job env value"] = JOB_ENV_VALUE
    agent = {
        "name": "chat",
        "auth_header_name": "Authorization",
        "auth_header_value": AUTH_SECRET,
        "instances": [{"base_url": "http://127.0.0.1:9", "auth_header_value": AUTH_SECRET + "-instance"}],
    }
    r = api.post("/api/v1/agents", agent, format="json")
    if r.status_code == 400 and "auth_header_value" in str(r.json()):
        agent["instances"] = [{"base_url": "http://127.0.0.1:9"}]
        r = api.post("/api/v1/agents", agent, format="json")
    assert r.status_code == 201, r.json()
    made["agent auth header"] = AUTH_SECRET
    assert [made[k][:6] for k in ("api key", "enrollment token", "node credential", "invitation")] == ["euler_"] * 4
    # Use the secrets once, so that any "last used" or audit path runs too.
    assert api.get("/api/v1/project").status_code == 200
    heartbeat = {"agent_version": "t", "resources": body["resources"], "running": []}
    Client(HTTP_AUTHORIZATION=f"Bearer {made['node credential']}").post(
        "/node-api/v1/heartbeat", heartbeat, content_type="application/json"
    )
    connection.force_debug_cursor = False
    return made


def _leaks(text: str, made: dict) -> list[str]:
    return [kind for kind, secret in made.items() if hidden_part(secret) in text]


def test_no_table_holds_a_secret_in_clear(secrets_made):
    seen = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
            for row in cursor.fetchall():
                for value in row:
                    if isinstance(value, bytes | memoryview):
                        value = bytes(value).decode("latin-1")
                    seen.append(str(value))
    dump = "\n".join(seen)
    assert "gpu-box" in dump and "with-secrets" in dump  # the dump did read the run's rows
    assert _leaks(dump, secrets_made) == []


def test_dumpdata_holds_no_secret(secrets_made):
    out = io.StringIO()
    call_command("dumpdata", stdout=out)
    dump = out.getvalue()
    assert "gpu-box" in dump
    assert _leaks(dump, secrets_made) == []


def test_logs_at_debug_hold_no_secret(secrets_made, caplog):
    records = caplog.get_records("setup")  # the run happened while setting up this test
    assert records, "the run logged nothing: the check would prove nothing"
    print(f"{len(records)} log records from {sorted({r.name for r in records})}")
    text = "\n".join(f"{r.getMessage()} {r.args!r} {r.__dict__!r}" for r in records)
    assert _leaks(text, secrets_made) == []


def test_admin_list_and_change_pages_hold_no_secret(secrets_made, make_user):
    staff = Client()
    staff.force_login(make_user("root-admin", staff=True))
    pages = 0
    for model, _ in admin.site._registry.items():
        meta = model._meta
        changelist = reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist")
        r = staff.get(changelist)
        assert r.status_code == 200, changelist
        text = r.content.decode()
        for pk in model._default_manager.values_list("pk", flat=True)[:20]:
            change = reverse(f"admin:{meta.app_label}_{meta.model_name}_change", args=[pk])
            page = staff.get(change)
            assert page.status_code == 200, change
            text += page.content.decode()
            pages += 1
        assert _leaks(text, secrets_made) == [], meta.label
    assert pages >= 6
