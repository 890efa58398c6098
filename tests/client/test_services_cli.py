"""`euler serve` and `euler services …` from the command line to the request, against a stand-in transport."""

from __future__ import annotations

import json

import httpx
import pytest
from euler_client.cli import run as euler
from euler_client.cli.commands import State
from euler_client.client import Client

SERVICE = {
    "name": "chat", "port": 8000, "replicas": {"min": 1, "max": 4, "current": 1}, "ready_replicas": 1,
    "revision": 1, "stable_revision": 1, "rollout": "", "message": "", "spec": {"image": "chat:1"},
    "invoke_path": "/api/v1/agents/chat/invoke/", "events": [], "created_at": "2026-12-03T16:00:00Z",
    "replica_list": [{"id": 3, "revision": 1, "state": "ready", "health": "healthy", "node": "n1", "job": 9,
                      "created_at": "2026-12-03T16:00:00Z"}],
}  # fmt: skip


@pytest.fixture
def sent(monkeypatch):
    requests: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        path = request.url.path
        if request.method == "POST" and path == "/api/v1/services":
            return httpx.Response(201, json=SERVICE)
        if path == "/api/v1/services":
            return httpx.Response(200, json={"count": 1, "next": None, "previous": None, "results": [SERVICE]})
        if path.endswith("/logs"):
            return httpx.Response(200, text="==> replica 3 <==\nhello")
        if request.method == "DELETE":
            return httpx.Response(202)
        return httpx.Response(200, json=SERVICE)

    client = Client("http://euler.test", "euler_pk_test", transport=httpx.MockTransport(answer))
    monkeypatch.setattr(State, "client", lambda self: client)
    return requests


def test_serve_sends_the_spec(sent, capsys):
    status = euler(["serve", "chat:1", "--port", "8000", "--replicas", "1:4", "--cpu", "2", "--memory", "1Gi",
                    "--gpus", "1", "--gpu-model", "A100*", "-e", "A=1", "--health-path", "/ready",
                    "--target-concurrency", "8", "--", "python", "-m", "chat"])  # fmt: skip
    assert status in (0, None)
    body = json.loads(sent[0].content)
    assert body == {
        "name": "chat", "image": "chat:1", "command": ["python", "-m", "chat"], "port": 8000, "cpu_milli": 2000,
        "memory_bytes": 1 << 30, "replicas": {"min": 1, "max": 4}, "readiness": {"path": "/ready"},
        "env": {"A": "1"}, "gpus": {"count": 1, "model": "A100*"}, "target_concurrency": 8,
    }  # fmt: skip
    assert "/api/v1/agents/chat/invoke/" in capsys.readouterr().err


def test_serve_needs_a_command_and_a_valid_range(sent):
    assert euler(["serve", "chat:1", "--port", "8000"]) != 0
    assert euler(["serve", "chat:1", "--port", "8000", "--replicas", "x", "--", "run"]) != 0
    assert not sent


def test_services_list_show_logs_scale_delete(sent, capsys):
    assert euler(["services"]) in (0, None)
    assert "chat" in capsys.readouterr().out
    assert euler(["services", "get", "chat"]) in (0, None)
    assert "n1" in capsys.readouterr().out
    assert euler(["services", "logs", "chat", "--replica", "3"]) in (0, None)
    assert "hello" in capsys.readouterr().out and sent[-1].url.params["replica"] == "3"
    assert euler(["services", "scale", "chat", "2:5"]) in (0, None)
    assert json.loads(sent[-1].content) == {"replicas": {"min": 2, "max": 5}}
    assert euler(["services", "delete", "chat"]) in (0, None)
    assert sent[-1].method == "DELETE" and sent[-1].url.path == "/api/v1/services/chat"
