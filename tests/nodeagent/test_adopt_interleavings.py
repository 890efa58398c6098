"""An agent restarted mid-job, on the real Docker engine: each order of the restart and the container's exit is
forced (the job waits for a file the test creates; the exit is awaited with the engine's own wait), never slept
into. The server's side of the same restart (the node offline meanwhile): tests/jobs/test_restart_hold.py."""

from __future__ import annotations

import json
import time

import pytest

from nodeagent.daemon import Daemon
from nodeagent.docker_runner import DockerRunner
from tests.nodeagent.test_executor import assignment, container_gone, make_executor, node, plane, touch, wait_for

pytestmark = pytest.mark.docker
__all__ = ["make_executor", "node", "plane"]  # fixtures

GATED = "echo started; while [ ! -e /tmp/go ]; do sleep 0.05; done; echo done; exit 3"


def container_of(owner: str, attempt_id: int) -> str:
    return DockerRunner().find_attempt(owner=owner, attempt_id=attempt_id).container_id


def started_then_stopped(make_executor, plane, attempt_id: int):
    """A gated job runs; its agent stops (the container runs on, still waiting for its file)."""
    first = make_executor()
    first.handle_assignment(assignment(attempt_id, ["sh", "-c", GATED]))
    wait_for(lambda: "started" in plane.log(attempt_id), "the job's first line shipped")
    first.close()
    return first


def assert_ended_once_with_its_code(plane, node, attempt_id: int) -> None:
    ended = wait_for(lambda: plane.ended(attempt_id), "the ended report")
    assert (ended["reason"], ended["exit_code"]) == ("exited", 3)
    assert plane.log(attempt_id) == "started\ndone\n"
    assert [r["state"] for r in plane.reports[attempt_id]].count("ended") == 1
    wait_for(lambda: container_gone(node, attempt_id), "the container's removal")


def test_an_agent_back_before_the_container_exits_follows_it_and_reports_its_exit_code(make_executor, plane, node):
    first = started_then_stopped(make_executor, plane, 31)
    second = make_executor()
    second.adopt()
    assert [a.attempt_id for a in second.running_attempts()] == [31]  # listed from the first heartbeat on
    touch(31, first.owner, "/tmp/go")  # the job ends now, under the adopting agent
    assert_ended_once_with_its_code(plane, node, 31)


def test_an_agent_back_after_the_container_exited_reports_its_exit_code(make_executor, plane, node):
    first = started_then_stopped(make_executor, plane, 32)
    touch(32, first.owner, "/tmp/go")
    assert DockerRunner().wait(container_of(first.owner, 32)) == 3  # exited while no agent watched
    assert plane.ended(32) is None
    second = make_executor()
    second.adopt()
    assert_ended_once_with_its_code(plane, node, 32)


def test_a_container_that_exited_before_its_deadline_passed_unwatched_reports_its_exit_code_not_timeout(
    make_executor, plane, node
):
    """Found by bench/chaos_features.py: the agent came back after the deadline and reported `timeout (exit 0)`."""
    first = started_then_stopped(make_executor, plane, 34)
    touch(34, first.owner, "/tmp/go")
    assert DockerRunner().wait(container_of(first.owner, 34)) == 3
    record = first.records_dir / "34.json"
    data = json.loads(record.read_text())
    data["deadline"] = time.time() - 5  # the deadline passed while no agent watched
    record.write_text(json.dumps(data))
    second = make_executor()
    second.adopt()
    assert_ended_once_with_its_code(plane, node, 34)


def test_a_stopping_agent_keeps_listing_the_attempts_it_leaves_running(make_executor, plane):
    """A heartbeat sent while the agent stops must not read as the container gone (the server would lose it)."""
    first = started_then_stopped(make_executor, plane, 33)
    assert [(a.attempt_id, a.state) for a in first.running_attempts()] == [(33, "running")]
    assert first.left_attempts() == [33]
    touch(33, first.owner, "/tmp/go")


class Recorder:
    def __init__(self, reply=None, error: Exception | None = None):
        self.calls, self.reply, self.error = [], reply, error

    def call(self, method, path, body=None, timeout=10):
        self.calls.append((method, path, body, timeout))
        if self.error:
            raise self.error
        return self.reply

    def close(self):
        pass


class Leaver:
    def __init__(self, left):
        self._left = left

    def left_attempts(self):
        return self._left


def daemon_with(client, left) -> Daemon:
    d = Daemon.__new__(Daemon)  # only say_leaving is exercised: no engine, no state dir
    d.client, d.executor, d.fatal = client, Leaver(left), None
    return d


def test_a_stopping_daemon_names_the_attempts_it_leaves_and_nothing_when_none(caplog):
    from nodeagent import protocol
    from nodeagent.client import Unreachable

    client = Recorder(reply={"held": [33], "hold_seconds": 60.0})
    daemon_with(client, [33]).say_leaving()
    assert [(m, p, b) for m, p, b, _ in client.calls] == [("POST", protocol.PATH_LEAVING, {"protocol_version": 1,
                                                                                         "attempts": [33]})]  # fmt: skip
    idle = Recorder()
    daemon_with(idle, []).say_leaving()
    assert idle.calls == []
    daemon_with(Recorder(error=Unreachable("down")), [33]).say_leaving()  # logged; the stop goes on
    assert "could not tell the control plane" in caplog.text
