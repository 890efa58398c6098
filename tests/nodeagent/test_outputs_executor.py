"""Outputs and inputs through the executor: real containers, the real HTTP client, a loopback control plane."""

from __future__ import annotations

import hashlib
import os
import uuid

import pytest

from nodeagent.client import ControlPlaneClient
from nodeagent.docker_runner import DockerRunner
from nodeagent.executor import Executor

from .outputs_plane import CREDENTIAL, OutputsPlane
from .test_executor import assignment, wait_for

pytestmark = pytest.mark.docker


@pytest.fixture
def plane():
    server = OutputsPlane()
    yield server
    server.close()


@pytest.fixture
def node(docker_engine):
    name = f"t-{uuid.uuid4().hex[:8]}"
    yield name
    runner = DockerRunner()
    for c in runner.list_managed(node_name=name):
        runner.remove(c.container_id)


@pytest.fixture
def make_executor(plane, node, tmp_path):
    made = []

    def make():
        client = ControlPlaneClient(plane.url, credential=CREDENTIAL)
        ex = Executor(client=client, node_name=node, state_dir=tmp_path / "state", stop_grace=1)
        made.append((ex, client))
        return ex

    yield make
    for ex, client in made:
        ex.close()
        client.close()


@pytest.fixture
def executor(make_executor):
    return make_executor()


def outputs(paths=("/out",), max_bytes=100 * 1024 * 1024) -> dict:
    return {"outputs": {"paths": list(paths), "max_bytes": max_bytes}}


def test_a_jobs_outputs_are_uploaded_before_its_end_is_reported(executor, plane, tmp_path):
    script = (
        "mkdir -p /out/logs && head -c 20000000 /dev/urandom > /out/model.bin && echo done > /out/logs/train.log"
        " && ln -s /etc/passwd /out/logs/passwd && sha256sum /out/model.bin"
    )
    executor.handle_assignment(assignment(1, ["sh", "-c", script], **outputs()))
    ended = wait_for(lambda: plane.ended(1), "the ended report", timeout=180)
    assert ended["reason"] == "exited" and ended["exit_code"] == 0
    assert ended["outputs"] == "truncated" and "symlink" in ended["outputs_message"]
    stored = plane.stored(1)
    assert set(stored) == {"out/model.bin", "out/logs/train.log"} and all(f["complete"] for f in stored.values())
    assert bytes(stored["out/logs/train.log"]["data"]) == b"done\n"
    skipped = plane.manifests[1][0]["skipped"]
    assert skipped == [{"path": "out/logs/passwd", "reason": "symlink", "message": skipped[0]["message"]}]
    assert "/etc/passwd" in skipped[0]["message"]
    assert os.listdir(tmp_path / "state" / "outputs") == []  # the spool is emptied after the upload


def test_a_failed_job_still_leaves_its_outputs(executor, plane):
    executor.handle_assignment(
        assignment(2, ["sh", "-c", "mkdir /out && echo core > /out/crash.txt; exit 3"], **outputs())
    )
    ended = wait_for(lambda: plane.ended(2), "the ended report", timeout=120)
    assert (ended["reason"], ended["exit_code"], ended["outputs"]) == ("exited", 3, "complete")
    assert bytes(plane.stored(2)["out/crash.txt"]["data"]) == b"core\n"


def test_a_cancelled_or_timed_out_job_still_leaves_its_outputs(executor, plane):
    script = "mkdir /out && echo partial > /out/p.txt && sleep 60"
    executor.handle_assignment(assignment(3, ["sh", "-c", script], timeout_seconds=2, **outputs()))
    ended = wait_for(lambda: plane.ended(3), "the ended report", timeout=120)
    assert ended["reason"] == "timeout" and ended["outputs"] == "complete"
    assert bytes(plane.stored(3)["out/p.txt"]["data"]) == b"partial\n"


def test_a_declared_path_the_job_never_wrote_is_reported_missing(executor, plane):
    executor.handle_assignment(assignment(4, ["true"], **outputs(["/out/model.bin"])))
    ended = wait_for(lambda: plane.ended(4), "the ended report", timeout=120)
    assert ended["outputs"] == "truncated" and "missing" in ended["outputs_message"]


def test_a_job_that_never_started_says_its_outputs_failed(executor, plane):
    executor.handle_assignment(assignment(5, ["/no/such/binary"], **outputs()))
    ended = wait_for(lambda: plane.ended(5), "the ended report", timeout=120)
    assert ended["reason"] == "start_failed" and ended["outputs"] in ("failed", "truncated")


def test_inputs_are_placed_before_the_command_starts(executor, plane):
    data = os.urandom(300_000)
    plane.inputs[7] = data
    item = {
        "output_id": 7,
        "url": plane.input_url(6, 7),
        "sha256": hashlib.sha256(data).hexdigest(),
        "size": len(data),
        "to": "/in/models/model.bin",
    }
    script = "sha256sum /in/models/model.bin > /out/sum && stat -c %s /in/models/model.bin >> /out/sum"
    executor.handle_assignment(assignment(6, ["sh", "-c", "mkdir /out && " + script], inputs=[item], **outputs()))
    ended = wait_for(lambda: plane.ended(6), "the ended report", timeout=120)
    assert ended["reason"] == "exited" and ended["exit_code"] == 0
    written = bytes(plane.stored(6)["out/sum"]["data"]).split()
    assert written[0].decode() == hashlib.sha256(data).hexdigest() and int(written[2]) == len(data)
    assert plane.input_auth == [f"Bearer {CREDENTIAL}"]


def test_an_input_from_a_presigned_url_is_fetched_without_the_credential(executor, plane):
    data = b"from the bucket\n"
    plane.inputs[11] = data
    item = {
        "output_id": 11,
        "url": f"{plane.url}/bucket-in/11?X-Amz-Signature=abc",
        "authenticated": False,
        "sha256": hashlib.sha256(data).hexdigest(),
        "size": len(data),
        "to": "/in/x.txt",
    }
    executor.handle_assignment(assignment(11, ["sh", "-c", "cat /in/x.txt"], inputs=[item]))
    ended = wait_for(lambda: plane.ended(11), "the ended report", timeout=120)
    assert ended["reason"] == "exited" and ended["exit_code"] == 0
    assert plane.input_auth == [""]


def test_an_input_that_does_not_match_its_checksum_ends_the_attempt_start_failed(executor, plane, node):
    plane.inputs[8] = b"tampered"
    item = {"output_id": 8, "url": plane.input_url(8, 8), "sha256": "0" * 64, "size": 8, "to": "/in/x"}
    executor.handle_assignment(assignment(8, ["sh", "-c", "echo should-not-run"], inputs=[item]))
    ended = wait_for(lambda: plane.ended(8), "the ended report", timeout=120)
    assert ended["reason"] == "start_failed" and "sha256" in ended["message"] and "/in/x" in ended["message"]
    assert [r["state"] for r in plane.reports[8]] == ["ended"]
    wait_for(lambda: DockerRunner().find_attempt(node_name=node, attempt_id=8) is None, "the container's removal")


def test_an_input_of_another_size_is_refused(executor, plane):
    plane.inputs[9] = b"longer than declared"
    digest = hashlib.sha256(b"longer than declared").hexdigest()
    item = {"output_id": 9, "url": plane.input_url(9, 9), "sha256": digest, "size": 4, "to": "/in/x"}
    executor.handle_assignment(assignment(9, ["true"], inputs=[item]))
    ended = wait_for(lambda: plane.ended(9), "the ended report", timeout=120)
    assert ended["reason"] == "start_failed" and "declared 4" in ended["message"]


def test_a_restarted_agent_collects_the_outputs_of_the_container_it_adopts(make_executor, plane, tmp_path):
    first = make_executor()
    script = "mkdir /out && sleep 2 && echo finished-while-the-agent-was-down > /out/result"
    first.handle_assignment(assignment(10, ["sh", "-c", script], **outputs()))
    wait_for(lambda: plane.reports.get(10), "the running report")
    first.close()
    leftover = tmp_path / "state" / "outputs" / "99"
    leftover.mkdir()
    (leftover / "f000001").write_bytes(b"an earlier agent's spool")
    second = make_executor()
    assert not leftover.exists()  # an attempt this agent does not hold: its spool is gone at start
    second.adopt()
    ended = wait_for(lambda: plane.ended(10), "the ended report", timeout=120)
    assert ended["outputs"] == "complete"
    assert bytes(plane.stored(10)["out/result"]["data"]) == b"finished-while-the-agent-was-down\n"


def test_an_attempt_fenced_during_its_upload_is_discarded_without_an_end(executor, plane, node, tmp_path):
    plane.faults = ["stale"]
    executor.handle_assignment(assignment(12, ["sh", "-c", "mkdir /out && echo x > /out/a"], **outputs()))
    wait_for(lambda: plane.chunk_puts, "the first chunk", timeout=120)
    wait_for(lambda: DockerRunner().find_attempt(node_name=node, attempt_id=12) is None, "the container's removal")
    wait_for(lambda: executor.running_attempts() == [], "the executor to forget the attempt")
    assert plane.ended(12) is None
    assert os.listdir(tmp_path / "state" / "outputs") == []
