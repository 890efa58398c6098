"""`euler schedules …` and `euler webhooks …` against the real API (in process, through WSGI)."""

from __future__ import annotations

import json

import httpx
import pytest
from django.core.handlers.wsgi import WSGIHandler
from euler_client.cli import run as euler
from euler_client.cli.commands import State
from euler_client.client import Client
from euler_client.parse import parse_retry_on

from tests.workflows.receiver import Receiver
from workflows import tasks

pytestmark = pytest.mark.django_db


@pytest.fixture
def cli(monkeypatch, api_key):
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    # as Django's test client does: the request must not close the test's connection (and its transaction)
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    client = Client("http://testserver", api_key, transport=httpx.WSGITransport(app=WSGIHandler()))
    monkeypatch.setattr(State, "client", lambda self: client)
    yield euler
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


def test_retry_on_takes_endings_and_exit_codes():
    assert parse_retry_on("lost,75,128-143") == ["lost", {"exit_codes": [75, "128-143"]}]
    assert parse_retry_on("lost,failed") == ["lost", "failed"]


def test_schedules_create_list_disable_enable_show_delete(cli, capsys):
    args = ["schedules", "create", "nightly", "--cron", "0 2 * * *", "--tz", "Asia/Shanghai", "--retry-on", "lost,75",
            "--json", "euler-test/busybox", "--", "echo", "tick"]  # fmt: skip
    assert cli(args) == 0
    made = json.loads(capsys.readouterr().out)
    assert made["job"]["command"] == ["echo", "tick"] and made["job"]["name"] == "nightly"
    assert made["job"]["retry_on"] == ["lost", {"exit_codes": [75]}] and made["timezone"] == "Asia/Shanghai"
    assert cli(["schedules", "--json"]) == 0
    assert [s["name"] for s in json.loads(capsys.readouterr().out)] == ["nightly"]
    assert cli(["schedules", "disable", "nightly"]) == 0
    assert "disabled" in capsys.readouterr().err
    assert cli(["schedules", "enable", "nightly"]) == 0
    assert cli(["schedules", "show", "nightly", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["enabled"] and shown["runs"] == []
    assert cli(["schedules", "delete", "nightly"]) == 0
    assert cli(["schedules", "show", "nightly"]) != 0


def test_a_bad_cron_is_the_servers_code(cli, capsys):
    assert cli(["schedules", "create", "x", "--cron", "61 * * * *", "euler-test/busybox", "true"]) != 0
    err = capsys.readouterr().err
    assert "cron" in err and "Traceback" not in err, err


def test_webhooks_create_deliveries_redeliver_delete(cli, capsys, settings):
    settings.EULER_WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    with Receiver() as receiver:
        assert cli(["webhooks", "create", receiver.url, "--events", "job.queued"]) == 0
        out = capsys.readouterr()
        assert out.out.strip().startswith("whsec_") and "shown once" in out.err
        assert cli(["jobs", "run", "-d", "euler-test/busybox", "--", "true"]) == 0
        capsys.readouterr()
        tasks.webhook_dispatch()
        assert cli(["webhooks", "--json"]) == 0
        (hook,) = json.loads(capsys.readouterr().out)
        assert cli(["webhooks", "deliveries", str(hook["id"]), "--json"]) == 0
        (delivery,) = json.loads(capsys.readouterr().out)
        assert delivery["state"] == "succeeded" and delivery["tries"][0]["status_code"] == 200
        assert cli(["webhooks", "redeliver", str(hook["id"]), str(delivery["id"])]) == 0
        assert cli(["webhooks", "delete", str(hook["id"])]) == 0
    assert len(receiver.requests) >= 1
    assert cli(["webhooks", "create", "http://127.0.0.1:9/"]) == 0  # allowed here; refused below
    settings.EULER_WEBHOOK_ALLOWED_NETWORKS = []
    capsys.readouterr()
    assert cli(["webhooks", "create", "http://10.0.0.1/"]) != 0
    err = capsys.readouterr().err
    assert "refused" in err and "Traceback" not in err, err
