"""Live logs end to end: every line once and in order over the websocket and `?follow=1`; an outage loses nothing."""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest
from websockets.sync.client import connect

from tests.e2e.test_jobs import Euler

pytestmark = [pytest.mark.e2e, pytest.mark.docker]

LINES = 50  # one every 100 ms for 5 s
SCRIPT = f"for i in $(seq 1 {LINES}); do echo line $i; sleep 0.1; done"
EXPECTED = "".join(f"line {i}\n" for i in range(1, LINES + 1))


@pytest.fixture
def make_euler(platform_factory, project, docker_engine):
    made = []

    def make(env: dict) -> Euler:
        e = Euler(platform_factory(env=env), project)
        made.append(e)
        return e

    yield make
    for e in made:
        e.cleanup()


def read_websocket(euler: Euler, job_id: int, out: dict) -> None:
    url = euler.platform.url.replace("http://", "ws://") + f"/ws/jobs/{job_id}/logs/"
    messages = []
    try:
        with connect(
            url, additional_headers={"X-Euler-API-Key": euler.key}, origin=euler.platform.url, open_timeout=30
        ) as ws:
            while True:
                message = json.loads(ws.recv(timeout=60))
                messages.append(message)
                if message["type"] == "end":
                    break
    except Exception as exc:  # noqa: BLE001 - reported to the test thread
        out["error"] = repr(exc)
    out["messages"] = messages


def read_follow(euler: Euler, job_id: int, out: dict) -> None:
    parts = []
    try:
        with httpx.stream(
            "GET",
            f"{euler.platform.url}/api/v1/jobs/{job_id}/logs",
            params={"follow": "1"},
            headers={"X-Euler-API-Key": euler.key},
            timeout=60,
        ) as r:
            out["status"] = r.status_code
            for text in r.iter_text():
                parts.append(text)
    except Exception as exc:  # noqa: BLE001
        out["error"] = repr(exc)
    out["text"] = "".join(parts)


def test_the_websocket_and_follow_each_get_every_line_once_and_in_order(make_euler):
    euler = make_euler({"EULER_NODE_HEARTBEAT_MIN_INTERVAL": "0.5"})
    euler.node()
    job = euler.submit(["sh", "-c", SCRIPT])
    ws_out: dict = {}
    ws_reader = threading.Thread(target=read_websocket, args=(euler, job["id"], ws_out))
    ws_reader.start()  # from the queued state: the attempt's log arrives live
    euler.wait_state(job["id"], {"running"})
    follow_out: dict = {}
    follow_reader = threading.Thread(target=read_follow, args=(euler, job["id"], follow_out))
    follow_reader.start()
    ws_reader.join(120)
    follow_reader.join(120)
    assert "error" not in ws_out, ws_out.get("error")
    logs = [m for m in ws_out["messages"] if m["type"] == "log"]
    assert [m["seq"] for m in logs] == list(range(len(logs)))
    assert "".join(m["data"] for m in logs) == EXPECTED
    assert ws_out["messages"][-1] == {"type": "end", "state": "succeeded"}
    assert "error" not in follow_out and follow_out["status"] == 200
    assert follow_out["text"] == EXPECTED
    assert euler.logs(job["id"]) == EXPECTED


def test_a_control_plane_stopped_for_5_s_mid_job_loses_and_duplicates_nothing(make_euler):
    from jobs.models import LogChunk

    euler = make_euler({"EULER_NODE_HEARTBEAT_MIN_INTERVAL": "0.5"})
    euler.node()
    job = euler.submit(["sh", "-c", SCRIPT])
    euler.wait_state(job["id"], {"running"})
    euler.platform.wait_for(lambda: "line 5\n" in euler.logs(job["id"]), "the first lines are stored")
    web = euler.platform.procs["web"]
    web.stop()
    time.sleep(5)
    web.start()
    euler.platform.wait_for(euler.platform._ready, "web answers again")
    done = euler.wait_state(job["id"], {"succeeded", "failed", "lost"}, timeout=90)
    assert done["state"] == "succeeded" and len(done["attempts"]) == 1
    chunks = list(LogChunk.objects.filter(attempt_id=done["attempts"][0]["id"]).order_by("seq"))
    assert [c.seq for c in chunks] == list(range(len(chunks)))
    offset = 0
    for c in chunks:
        assert c.offset == offset
        offset += len(c.data.encode())
    assert "".join(c.data for c in chunks) == EXPECTED
    assert euler.logs(job["id"]) == EXPECTED
