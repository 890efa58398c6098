"""`euler NOUN VERB`: a noun alone lists, old spellings still work, and a command imports only what it uses."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import httpx
import pytest
from euler_client.cli import run as euler
from euler_client.cli.commands import COMMANDS, State, load
from euler_client.client import Client


@pytest.fixture
def sent(monkeypatch):
    requests: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        if request.method == "GET":
            return httpx.Response(200, json={"count": 0, "next": None, "results": [], "own": [], "public_pool": {}})
        if request.method == "DELETE":
            return httpx.Response(204)
        return httpx.Response(201, json={"name": "chat", **json.loads(request.content or b"{}")})

    client = Client("http://euler.test", "euler_pk_test", transport=httpx.MockTransport(answer))
    monkeypatch.setattr(State, "client", lambda self: client)
    return requests


@pytest.mark.parametrize(
    ("args", "method", "path"),
    [
        (["jobs"], "GET", "/api/v1/jobs"),
        (["jobs", "--state", "running", "--json"], "GET", "/api/v1/jobs"),
        (["nodes", "--json"], "GET", "/api/v1/nodes"),
        (["agents", "--json"], "GET", "/api/v1/agents"),
        (["keys", "--json"], "GET", "/api/v1/api-keys"),
        (["agents", "add", "chat", "--url", "https://a.example.com", "--json"], "POST", "/api/v1/agents"),
        (["agents", "create", "chat", "--url", "https://a.example.com", "--json"], "POST", "/api/v1/agents"),
        (["agents", "remove", "chat"], "DELETE", "/api/v1/agents/chat"),
        (["keys", "revoke", "3"], "DELETE", "/api/v1/api-keys/3"),
        (["keys", "delete", "3"], "DELETE", "/api/v1/api-keys/3"),
    ],
)
def test_a_noun_alone_lists_and_old_verbs_still_work(sent, capsys, args, method, path):
    assert euler(args) == 0
    assert (sent[0].method, sent[0].url.path) == (method, path)
    if "--state" in args:
        assert sent[0].url.params["state"] == "running"


def test_every_registered_command_loads_and_the_shortcuts_are_the_jobs_verbs():
    for name in COMMANDS:
        assert load(name) is not None, name
    jobs = load("jobs")
    for verb in ("run", "logs", "cancel"):
        assert load(verb) is jobs.get_command(None, verb)


def _modules_after(args: list[str]) -> set[str]:
    """The top-level packages imported by one `euler ARGS` in a fresh interpreter (the server not answering).
    (Top-level names only: `euler_client` puts a stand-in for `httpx._main` in sys.modules, see its __init__.)"""
    script = (
        "import sys; from euler_client.cli import run; run(sys.argv[1:]); "
        "sys.stderr.write('MODULES ' + ' '.join(sorted(m for m in sys.modules if '.' not in m)))"
    )
    env = {**os.environ, "EULER_URL": "http://127.0.0.1:9", "EULER_API_KEY": "euler_pk_test"}
    done = subprocess.run([sys.executable, "-c", script, *args], env=env, capture_output=True, text=True, timeout=60)
    return set(done.stderr.rpartition("MODULES ")[2].split())


def test_help_imports_no_http_library_no_rich_and_no_command_module():
    loaded = _modules_after(["--help"])
    assert "click" in loaded
    assert not loaded & {"httpx", "websockets", "rich", "yaml", "jsonschema"}


def test_the_everyday_run_imports_no_cli_framework_and_no_http_library():
    loaded = _modules_after(["run", "--network", "none", "alpine:3.20", "--", "true"])
    assert "euler_client" in loaded
    assert not loaded & {"click", "httpx", "httpcore", "websockets", "rich", "yaml", "typing"}
