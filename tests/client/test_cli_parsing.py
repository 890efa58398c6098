"""`euler run` from the command line to the request body, in process, against a stand-in transport."""

from __future__ import annotations

import json

import httpx
import pytest
from euler_client.cli import run as euler
from euler_client.cli.commands import State
from euler_client.client import Client


@pytest.fixture
def sent(monkeypatch):
    """Every request the CLI makes, answered like the server would for a submit."""
    requests: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        if request.method == "POST" and request.url.path == "/api/v1/jobs":
            return httpx.Response(201, json={"id": 42, "state": "queued", **json.loads(request.content)})
        return httpx.Response(404, json={"code": "not_found", "detail": "No such job."})

    client = Client("http://euler.test", "euler_pk_test", transport=httpx.MockTransport(answer))
    monkeypatch.setattr(State, "client", lambda self: client)
    return requests


def test_run_passes_disk_priority_network_and_the_rest_as_api_fields(sent, capsys):
    status = euler(["run", "--detach", "--cpu", "1.5", "--memory", "1Gi", "--disk", "10Gi", "--priority", "-5",
                    "--network", "none", "--timeout", "1h30m", "--gpus", "1", "--retries", "2", "--retry-on",
                    "lost,failed", "--label", "zone=a", "--env", "A=1", "--pool", "own", "--min-trust", "platform",
                    "--region", "cn-hz", "--name", "train", "alpine:3.20", "--", "sh", "-c", "echo hi"])  # fmt: skip
    assert status == 0
    assert capsys.readouterr().out == "42\n"
    body = json.loads(sent[0].content)
    assert body == {
        "name": "train", "image": "alpine:3.20", "command": ["sh", "-c", "echo hi"], "cpu_milli": 1500,
        "memory_bytes": 1 << 30, "disk_bytes": 10 << 30, "priority": -5, "network": "none",
        "timeout_seconds": 5400, "gpu_count": 1, "max_retries": 2, "retry_on": ["lost", "failed"],
        "node_selector": {"zone": "a"}, "env": {"A": "1"}, "pool": "own", "min_trust": "platform", "region": "cn-hz",
    }  # fmt: skip
    assert sent[0].headers["X-Euler-API-Key"] == "euler_pk_test"


def test_run_reads_a_job_file_and_flags_override_it(sent, tmp_path, capsys):
    job = tmp_path / "job.yaml"
    job.write_text("name: nightly\nimage: etl:3\ncommand: [python, etl.py]\ncpu_milli: 2000\npriority: 10\n")
    assert euler(["run", "-d", "-f", str(job), "--priority", "20"]) == 0
    body = json.loads(sent[0].content)
    assert body["name"] == "nightly" and body["command"] == ["python", "etl.py"] and body["cpu_milli"] == 2000
    assert body["priority"] == 20 and body["memory_bytes"] == 256 << 20


@pytest.mark.parametrize(
    "args",
    [["run", "--cpu", "5x", "a", "--", "true"], ["run", "--disk", "ten", "a"], ["run", "--priority", "high", "a"],
     ["run", "--bogus", "a"], ["run", "-f", "/nonexistent.yaml"], ["logs", "abc"], ["frobnicate"]],
)  # fmt: skip
def test_bad_input_is_one_line_with_exit_2_and_nothing_sent(sent, capsys, args):
    assert euler(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("euler: error: ") and err.count("\n") == 1 and "Traceback" not in err
    assert sent == []


def test_a_refused_request_shows_the_servers_code(sent, capsys):
    assert euler(["jobs", "show", "7"]) == 1
    assert capsys.readouterr().err == "euler: error: No such job. [not_found]\n"


def test_a_job_file_that_is_not_a_mapping_is_refused(sent, tmp_path, capsys):
    job = tmp_path / "job.yaml"
    job.write_text("- just\n- a list\n")
    assert euler(["run", "-f", str(job)]) == 2
    assert "mapping" in capsys.readouterr().err and sent == []


def test_run_sends_a_typed_gpu_request_as_the_gpus_object(sent):
    assert euler(["run", "-d", "--gpus", "2", "--gpu-model", "A100*", "--gpu-min-memory", "40", "img", "true"]) == 0
    body = json.loads(sent[0].content)
    assert body["gpus"] == {"count": 2, "model": "A100*", "min_memory_gib": 40} and "gpu_count" not in body
    assert euler(["run", "-d", "--gpu-min-memory", "79.5Gi", "img", "true"]) == 0
    assert json.loads(sent[1].content)["gpus"] == {"count": 1, "min_memory_gib": 79.5}


def test_a_bad_gpu_memory_is_a_usage_error(sent, capsys):
    assert euler(["run", "-d", "--gpu-min-memory", "lots", "img", "true"]) == 2
    assert "GPU memory is a number of GiB" in capsys.readouterr().err and sent == []


def test_the_python_client_sends_a_typed_request_as_given(sent):
    from euler_client.jobrequest import RunRequest

    client = Client("http://euler.test", "euler_pk_test", transport=httpx.MockTransport(lambda r: sent.append(r) or
                    httpx.Response(201, json={"id": 1})))  # fmt: skip
    client.jobs.submit(name="t", gpus={"count": 2, "model": "A100*", "min_memory_gib": 40})
    assert json.loads(sent[-1].content)["gpus"] == {"count": 2, "model": "A100*", "min_memory_gib": 40}
    body = RunRequest(image="i", gpu_count=2, gpu_model="A100*", gpu_min_memory_gib=40).body()
    assert body["gpus"] == {"count": 2, "model": "A100*", "min_memory_gib": 40} and "gpu_count" not in body
    assert "gpus" not in RunRequest(image="i", gpu_count=2).body()


def test_run_asks_for_a_priority_class_by_name(sent, capsys):
    assert euler(["run", "-d", "--priority-class", "urgent", "alpine:3.20", "--", "true"]) == 0
    assert json.loads(sent[0].content)["priority_class"] == "urgent"


def test_classes_lists_the_priority_classes(monkeypatch, capsys):
    def answer(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/api/v1/priority-classes"
        return httpx.Response(200, json=[
            {"name": "urgent", "value": 100, "description": "deadlines", "allowed": False, "default": False},
            {"name": "normal", "value": 0, "description": "", "allowed": True, "default": True},
        ])  # fmt: skip

    client = Client("http://euler.test", "euler_pk_test", transport=httpx.MockTransport(answer))
    monkeypatch.setattr(State, "client", lambda self: client)
    assert euler(["classes"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["NAME", "VALUE", "ALLOWED", "DESCRIPTION"]
    assert out[1].split() == ["urgent", "100", "no", "deadlines"] and out[2].split() == [
        "normal",
        "0",
        "yes",
        "default",
    ]
