"""Uploads against a real loopback HTTP server speaking the outputs protocol: chunks, resume, presigned PUT."""

from __future__ import annotations

import hashlib
import os
import threading

import pytest

from nodeagent import protocol
from nodeagent.backoff import Backoff
from nodeagent.client import ControlPlaneClient
from nodeagent.logship import Stale
from nodeagent.outputs.collect import Collected
from nodeagent.outputs.spool import OutputSpool
from nodeagent.outputs.upload import Interrupted, Uploader

from .outputs_plane import CREDENTIAL, OutputsPlane

CHUNK = 64 * 1024


@pytest.fixture
def plane():
    server = OutputsPlane()
    yield server
    server.close()


@pytest.fixture
def client(plane):
    made = ControlPlaneClient(plane.url, credential=CREDENTIAL)
    yield made
    made.close()


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch):
    monkeypatch.setattr(protocol, "MAX_OUTPUT_CHUNK_BYTES", CHUNK)


def spooled(tmp_path, files: dict[str, bytes], *, attempt: int = 1):
    spool = OutputSpool(tmp_path / "outputs").attempt(attempt).open()
    entries, names = [], {}
    for path, data in files.items():
        name, fd = spool.new_file()
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        names[path] = name
        entries.append(protocol.OutputFile(path=path, size=len(data), sha256=hashlib.sha256(data).hexdigest()))
    return spool, Collected(protocol.OutputManifest(files=entries), names)


def uploader(client, spool, attempt=1, **kw):
    kw.setdefault("backoff", Backoff(base=0.01, cap=0.05))
    return Uploader(client, attempt, spool, closing=threading.Event(), **kw)


def test_files_go_up_in_chunks_and_the_server_verifies_each(plane, client, tmp_path):
    data = {"out/model.bin": os.urandom(3 * CHUNK + 123), "out/logs/a.txt": b"hello\n", "out/empty": b""}
    spool, collected = spooled(tmp_path, data)
    assert uploader(client, spool).run(collected) == ("complete", "3 files")
    stored = plane.stored(1)
    assert {p: bytes(f["data"]) for p, f in stored.items()} == data
    assert all(f["complete"] for f in stored.values())
    assert plane.chunk_puts == 4 + 1 + 1  # no chunk larger than the protocol's, an empty file in one empty PUT


def test_a_failed_chunk_is_resumed_from_the_offset_the_server_holds(plane, client, tmp_path):
    data = os.urandom(5 * CHUNK)
    spool, collected = spooled(tmp_path, {"out/model.bin": data})
    plane.faults = ["ok", "500_after_store", "500", "409", "ok"]
    assert uploader(client, spool).run(collected)[0] == "complete"
    assert bytes(plane.stored(1)["out/model.bin"]["data"]) == data
    # A chunk stored before its answer failed is not sent again: resumed from the server's offset.
    assert plane.chunk_bytes == len(data) + 2 * CHUNK


def test_an_upload_resumes_from_the_offset_a_previous_agent_left(plane, client, tmp_path):
    data = os.urandom(4 * CHUNK)
    spool, collected = spooled(tmp_path, {"out/model.bin": data})
    plane.faults = ["ok", "ok", "stale"]
    with pytest.raises(Stale):
        uploader(client, spool).run(collected)
    sent = plane.chunk_bytes
    assert sent == 3 * CHUNK and len(plane.stored(1)["out/model.bin"]["data"]) == 2 * CHUNK
    assert uploader(client, spool).run(collected)[0] == "complete"  # the plan's offset: the rest only
    assert plane.chunk_bytes - sent == 2 * CHUNK
    assert bytes(plane.stored(1)["out/model.bin"]["data"]) == data


def test_a_server_down_for_a_while_is_waited_for(plane, client, tmp_path):
    spool, collected = spooled(tmp_path, {"out/a": os.urandom(2 * CHUNK)})
    plane.down = True
    timer = threading.Timer(0.5, lambda: setattr(plane, "down", False))
    timer.start()
    assert uploader(client, spool).run(collected)[0] == "complete"
    timer.join()


def test_a_server_that_never_answers_fails_the_outputs_with_a_reason(plane, client, tmp_path):
    spool, collected = spooled(tmp_path, {"out/a": b"x"})
    plane.down = True
    outputs, message = uploader(client, spool, give_up_seconds=0.3).run(collected)
    assert outputs == "failed" and "manifest" in message


def test_a_checksum_the_server_does_not_match_fails_that_file(plane, client, tmp_path):
    spool, collected = spooled(tmp_path, {"out/a": b"right", "out/b": b"fine"})
    with open(spool.path / collected.spool_names["out/a"], "wb") as fh:
        fh.write(b"wrong")  # changed after its sha256 was taken
    outputs, message = uploader(client, spool).run(collected)
    assert outputs == "failed" and "out/a" in message and "checksum_mismatch" in message
    assert plane.stored(1)["out/b"]["complete"]


def test_files_the_plan_refuses_make_the_outputs_truncated(plane, client, tmp_path):
    spool, collected = spooled(tmp_path, {"out/a": b"a", "out/b": b"b"})
    plane.refuse = {"out/b"}
    outputs, message = uploader(client, spool).run(collected)
    assert outputs == "truncated" and "1 files kept, 1 left out" in message
    assert set(plane.stored(1)) == {"out/a"}


def test_a_presigned_put_sends_exactly_the_plans_headers_and_no_credential(tmp_path):
    plane = OutputsPlane(method="put")
    client = ControlPlaneClient(plane.url, credential=CREDENTIAL)
    try:
        data = os.urandom(3 * CHUNK)
        spool, collected = spooled(tmp_path, {"out/model.bin": data, "out/empty": b""})
        assert uploader(client, spool).run(collected)[0] == "complete"
        assert bytes(plane.stored(1)["out/model.bin"]["data"]) == data
        for seen in plane.seen_put_headers:
            assert seen["x-amz-meta-euler"] == "yes" and "Authorization" not in seen
            assert "chunked" not in seen.get("Transfer-Encoding", "")
        assert plane.chunk_puts == 0
    finally:
        client.close()
        plane.close()


def test_the_agent_closing_interrupts_a_waiting_upload(plane, client, tmp_path):
    spool, collected = spooled(tmp_path, {"out/a": b"x"})
    plane.down = True
    closing = threading.Event()
    threading.Timer(0.3, closing.set).start()
    with pytest.raises(Interrupted):
        Uploader(client, 1, spool, closing=closing, backoff=Backoff(base=0.05, cap=0.1)).run(collected)


def test_the_credential_goes_only_to_the_agents_own_control_plane(plane, client):
    from nodeagent.client import Refused

    plane.inputs[2] = b"input bytes"
    # The server names itself by its public URL; the agent asks its own control plane for that node-API path.
    with client.download("https://euler.example.com/node-api/v1/attempts/1/inputs/2") as response:
        assert response.read() == b"input bytes"
    assert plane.input_auth == [f"Bearer {CREDENTIAL}"]
    with pytest.raises(Refused) as caught:
        with client.download("https://elsewhere.example/steal"):
            pass
    assert caught.value.code == "foreign_url"
    with pytest.raises(Refused) as caught:
        client.send("PUT", "http://203.0.113.9/bucket/1", content=b"", authenticated=False)
    assert caught.value.code == "insecure_url"
