"""`euler nodes mine` and `euler nodes terms NAME …`: what they send, and that options change only what they name."""

from __future__ import annotations

import json

import httpx
import pytest
from euler_client.cli import run as euler
from euler_client.cli.commands import State
from euler_client.client import Client

CURRENT = {"timezone": "Asia/Shanghai", "windows": [], "max_cpu_milli": 4000, "max_memory_bytes": None,
           "max_gpus": None, "max_disk_bytes": None, "allowed_projects": ["vision"], "max_job_hours": None}  # fmt: skip


@pytest.fixture
def sent(monkeypatch):
    requests: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        if request.url.path == "/api/v1/lending":
            return httpx.Response(200, json={"machines": [{"name": "box", "state": "online", "daily": [
                {"cpu_hours": 1.5, "gpu_hours": 0.5}], "running": {"jobs": [], "other_jobs": 2}}]})  # fmt: skip
        if request.method == "PUT":
            return httpx.Response(200, json={"node": "box", "terms": json.loads(request.content) or None})
        return httpx.Response(200, json={"node": "box", "terms": CURRENT})

    client = Client("http://euler.test", "euler_pk_test", transport=httpx.MockTransport(answer))
    monkeypatch.setattr(State, "client", lambda self: client)
    return requests


def test_mine_lists_the_lent_machines(sent, capsys):
    assert euler(["nodes", "mine"]) == 0
    assert sent[0].url.path == "/api/v1/lending"
    out = capsys.readouterr().out
    assert "box" in out and "1.5" in out


def test_terms_changes_only_what_the_options_name(sent):
    assert euler(["nodes", "terms", "box", "--window", "weekdays 20:00-08:00", "--max-hours", "6"]) == 0
    put = [r for r in sent if r.method == "PUT"][0]
    assert put.url.path == "/api/v1/lending/box/terms"
    body = json.loads(put.content)
    assert body["windows"] == [{"days": ["weekdays"], "start": "20:00", "end": "08:00"}]
    assert (body["max_job_hours"], body["max_cpu_milli"], body["allowed_projects"]) == (6.0, 4000, ["vision"])


def test_terms_without_options_shows_them_and_clear_removes_them(sent, capsys):
    assert euler(["nodes", "terms", "box"]) == 0
    assert [r.method for r in sent] == ["GET"] and "max_cpu_milli" in capsys.readouterr().out
    assert euler(["nodes", "terms", "box", "--clear"]) == 0
    assert json.loads(sent[-1].content) == {}


def test_a_window_that_is_not_days_and_a_span_is_refused_before_any_call(sent):
    assert euler(["nodes", "terms", "box", "--window", "evenings"]) != 0
    assert not [r for r in sent if r.method == "PUT"]
