"""`euler run`'s fast path (no click) sends the same request as click's path, and leaves the rest to click."""

from __future__ import annotations

import json

import httpx
import pytest
from euler_client.cli import run as euler
from euler_client.cli import runargs
from euler_client.cli.commands import State
from euler_client.cli.runargs import fast_parse
from euler_client.client import Client


@pytest.fixture
def sent(monkeypatch):
    requests: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        return httpx.Response(201, json={"id": 42, "state": "queued", **json.loads(request.content)})

    client = Client("http://euler.test", "euler_pk_test", transport=httpx.MockTransport(answer))
    monkeypatch.setattr(State, "client", lambda self: client)
    monkeypatch.setattr(State, "close", lambda self: None)
    return requests


CASES = [
    ["-d", "--network", "none", "alpine:3.20", "--", "true"],
    ["--detach", "--cpu=1.5", "--memory", "1Gi", "--label", "a=b", "--label", "c=d", "img", "sh", "-c", "x y"],
    ["-d", "--env", "A=1", "--retry-on", "lost,failed", "--priority", "-5", "--", "img", "--cpu", "2"],
    ["-d", "--timeout", "1h30m", "--disk", "10Gi", "--gpus", "1", "--name", "n", "img"],
    ["-d", "--gpus", "2", "--gpu-model", "A100*", "--gpu-min-memory", "40Gi", "img"],
]


@pytest.mark.parametrize("args", CASES)
def test_the_fast_path_sends_what_clicks_path_sends(sent, monkeypatch, capsys, args):
    assert fast_parse(args) is not None
    assert euler(["run", *args]) == 0
    monkeypatch.setattr(runargs, "fast_run", lambda args: None)
    assert euler(["run", *args]) == 0
    assert capsys.readouterr().out == "42\n42\n"
    assert json.loads(sent[0].content) == json.loads(sent[1].content)


@pytest.mark.parametrize(
    "args",
    [["--help"], ["--cpu", "5x", "a"], ["-f", "job.yaml"], ["-dq", "a"], ["--bogus", "a"], [], ["--cpu"],
     ["--env-file", ".env", "a"], ["--json=1", "a"]],
)  # fmt: skip
def test_anything_unusual_is_left_to_click(args):
    assert fast_parse(args) is None
