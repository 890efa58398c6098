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
    ["-d", "--array", "100", "--parallelism", "5", "--after", "12", "--after", "array:7:ended", "img", "true"],
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


def test_array_and_after_become_the_apis_fields(sent, capsys):
    assert euler(["run", "-d", "--array", "3", "--after", "12:ended", "--after", "13", "img", "--", "echo", "x"]) == 0
    body = json.loads(sent[0].content)
    assert body["array"] == {"count": 3}
    assert body["depends_on"] == [{"job": 12, "condition": "ended"}, {"job": 13, "condition": "succeeded"}]
    assert capsys.readouterr().out == "42\n"
    assert euler(["run", "-d", "img", "true"]) == 0
    assert "array" not in json.loads(sent[1].content) and "depends_on" not in json.loads(sent[1].content)


@pytest.mark.parametrize(
    ("text", "dep"),
    [("12", {"job": 12, "condition": "succeeded"}), ("12:ended", {"job": 12, "condition": "ended"}),
     ("job:5:succeeded", {"job": 5, "condition": "succeeded"}), ("array:7", {"array": 7, "condition": "succeeded"}),
     ("array:7:ended", {"array": 7, "condition": "ended"})],
)  # fmt: skip
def test_after_reads_a_job_or_an_array_and_a_condition(text, dep):
    from euler_client.parse import parse_after

    assert parse_after(text) == dep


@pytest.mark.parametrize("text", ["", "x", "0", "12:afterok", "array:", "12:ended:x", "-3"])
def test_after_refuses_what_it_cannot_read(text):
    from euler_client.parse import ParseError, parse_after

    with pytest.raises(ParseError):
        parse_after(text)
