"""The executor on the real Docker engine against a fake control plane: reports, logs, stop, adopt, reap."""

from __future__ import annotations

import glob
import json
import logging
import os
import threading
import time
import uuid

import docker
import pytest
from docker.models.containers import _create_container_args

from nodeagent import containers, protocol
from nodeagent.client import Refused, Unreachable
from nodeagent.docker_runner import DockerRunner
from nodeagent.executor import Executor

pytestmark = pytest.mark.docker

IMAGE = "euler-test/busybox"


class FakeControlPlane:
    """Answers the executor's POSTs like the server: reports, idempotent log chunks; can go down or fence."""

    def __init__(self):
        self.lock = threading.Lock()
        self.reports: dict[int, list[dict]] = {}
        self.chunks: dict[int, dict[int, dict]] = {}
        self.down = False
        self.fenced: set[int] = set()
        self.stop_on_report: set[int] = set()
        self.cap: int | None = None  # like EULER_MAX_LOG_BYTES: past it the reply says `capped`
        self.gaps: dict[int, dict[int, dict]] = {}  # output the agent could not deliver or never read

    def call(self, method, path, body=None, timeout=10):
        if self.down:
            raise Unreachable("control plane stopped")
        parts = path.split("/")
        attempt_id = int(parts[1])
        if attempt_id in self.fenced:
            raise Refused(409, "stale_attempt", {"code": "stale_attempt", "stop": True})
        with self.lock:
            if parts[2] == "report":
                self.reports.setdefault(attempt_id, []).append(body)
                return {"accepted": True, "stop": attempt_id in self.stop_on_report}
            stored = self.chunks.setdefault(attempt_id, {})
            for c in body["chunks"]:
                stored.setdefault(c["seq"], c)
            for g in body.get("gaps", []):
                self.gaps.setdefault(attempt_id, {}).setdefault(g["seq"], g)
            kept = sum(len(c["data"]) for c in stored.values())
            return {"stored": len(body["chunks"]), "capped": self.cap is not None and kept > self.cap}

    def ended(self, attempt_id: int) -> dict | None:
        return next((r for r in self.reports.get(attempt_id, []) if r["state"] == "ended"), None)

    def log(self, attempt_id: int) -> str:
        chunks = [c for _, c in sorted(self.chunks.get(attempt_id, {}).items())]
        offset = 0
        for c in chunks:
            assert c["offset"] == offset, "gap or overlap in the shipped offsets"
            offset += len(c["data"].encode())
        return "".join(c["data"] for c in chunks)

    def stream(self, attempt_id: int, stream: str) -> str:
        """One stream's output as stored (the engine may interleave the two differently from the attach)."""
        chunks = [c for _, c in sorted(self.chunks.get(attempt_id, {}).items()) if c["stream"] == stream]
        return "".join(c["data"] for c in chunks)


def wait_for(predicate, what: str, timeout: float = 60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def node(docker_engine):
    name = f"t-{uuid.uuid4().hex[:8]}"
    yield name
    runner = DockerRunner()
    for c in runner.list_managed(node_name=name):
        runner.remove(c.container_id)


@pytest.fixture
def plane():
    return FakeControlPlane()


@pytest.fixture
def make_executor(node, plane, tmp_path):
    made = []

    def make(**kw):
        ex = Executor(client=plane, node_name=node, state_dir=tmp_path / "state", stop_grace=1, **kw)
        made.append(ex)
        return ex

    yield make
    for ex in made:
        ex.close()


def assignment(attempt_id: int, command: list[str], **over) -> protocol.Assignment:
    base = {
        "attempt_id": attempt_id,
        "job_id": attempt_id * 10,
        "attempt_number": 1,
        "image": IMAGE,
        "command": command,
        "cpu_milli": 500,
        "memory_bytes": 64 * 1024 * 1024,
        "timeout_seconds": 60,
        "stop_grace_seconds": 1,
    }
    return protocol.Assignment.model_validate(base | over)


def container_gone(node: str, attempt_id: int) -> bool:
    return DockerRunner().find_attempt(node_name=node, attempt_id=attempt_id) is None


def test_a_hello_job_reports_running_then_exit_0_ships_its_log_and_is_removed(make_executor, plane, node):
    ex = make_executor()
    ex.handle_assignment(assignment(1, ["sh", "-c", "echo hello from Euler"]))
    ended = wait_for(lambda: plane.ended(1), "the ended report")
    assert plane.reports[1][0]["state"] == "running" and plane.reports[1][0]["container_id"]
    assert ended["reason"] == "exited" and ended["exit_code"] == 0
    assert plane.log(1) == "hello from Euler\n"
    wait_for(lambda: container_gone(node, 1), "the container's removal")
    # The run removes the container, then leaves the executor's table as its thread ends: wait for that too.
    wait_for(lambda: ex.running_attempts() == [], "the executor to forget the attempt")


def test_a_nonzero_exit_is_reported_with_its_code(make_executor, plane):
    make_executor().handle_assignment(assignment(2, ["sh", "-c", "echo bye >&2; exit 3"]))
    ended = wait_for(lambda: plane.ended(2), "the ended report")
    assert (ended["reason"], ended["exit_code"]) == ("exited", 3)
    assert plane.chunks[2][0]["stream"] == "stderr"


def test_an_oom_kill_is_reported_as_oom(make_executor, plane):
    # The hog waits for SIGUSR1, sent once the agent reported the container running: containerd before 2.2 watches
    # a container's memory cgroup only after its start returned, and an OOM in the first milliseconds goes
    # unreported to every client (containerd/containerd#8180); the agent then says what the SIGKILL may be.
    hog = "trap 'go=1' USR1; echo ready; while [ -z \"$go\" ]; do sleep 0.05; done; a=$(head -c 200000000 /dev/zero | tr '\\0' x)"
    make_executor().handle_assignment(assignment(3, ["sh", "-c", hog], memory_bytes=8 * 1024 * 1024))
    running = wait_for(lambda: plane.reports.get(3), "the running report")[0]
    wait_for(lambda: "ready" in plane.log(3), "the hog's trap set (its first line)")
    docker.from_env().api.kill(running["container_id"], signal="SIGUSR1")
    assert wait_for(lambda: plane.ended(3), "the ended report")["reason"] == "oom"


def test_an_absent_image_ends_as_image_pull_failed_without_running(make_executor, plane):
    make_executor().handle_assignment(assignment(4, ["true"], image=f"euler-test/absent-{uuid.uuid4().hex[:6]}:1"))
    ended = wait_for(lambda: plane.ended(4), "the ended report")
    assert ended["reason"] == "image_pull_failed"
    assert [r["state"] for r in plane.reports[4]] == ["ended"]


def test_a_start_failure_ends_as_start_failed_with_dockers_message(make_executor, plane, node):
    make_executor().handle_assignment(assignment(5, ["/no/such/binary"]))
    ended = wait_for(lambda: plane.ended(5), "the ended report")
    assert ended["reason"] == "start_failed" and "no/such/binary" in ended["message"]
    wait_for(lambda: container_gone(node, 5), "the container's removal")  # removed after the end is reported


def test_a_job_past_its_timeout_is_stopped_and_reported_as_timeout(make_executor, plane, node):
    make_executor().handle_assignment(assignment(6, ["sleep", "60"], timeout_seconds=1))
    ended = wait_for(lambda: plane.ended(6), "the ended report")
    assert ended["reason"] == "timeout" and ended["exit_code"] is not None
    wait_for(lambda: container_gone(node, 6), "the container's removal")


def test_a_stop_command_cancels_the_container_and_removes_it(make_executor, plane, node):
    ex = make_executor()
    ex.handle_assignment(assignment(7, ["sleep", "60"]))
    wait_for(lambda: plane.reports.get(7), "the running report")
    assert [a.state for a in ex.running_attempts()] == ["running"]
    ex.handle_command(protocol.Command(type="stop_attempt", attempt_id=7, reason="cancelled"))
    assert wait_for(lambda: plane.ended(7), "the ended report")["reason"] == "cancelled"
    wait_for(lambda: container_gone(node, 7), "the container's removal")


def test_a_report_answered_with_stop_removes_the_container_without_an_end_report(make_executor, plane, node):
    plane.stop_on_report.add(8)
    make_executor().handle_assignment(assignment(8, ["sleep", "60"]))
    wait_for(lambda: plane.reports.get(8), "the running report")
    wait_for(lambda: container_gone(node, 8), "the container's removal")
    assert plane.ended(8) is None


def test_a_fenced_log_upload_stops_and_removes_the_container(make_executor, plane, node):
    ex = make_executor()
    ex.handle_assignment(assignment(9, ["sh", "-c", "while true; do echo tick; sleep 0.1; done"]))
    wait_for(lambda: plane.chunks.get(9), "the first log chunk")
    plane.fenced.add(9)
    wait_for(lambda: container_gone(node, 9), "the container's removal")
    wait_for(lambda: ex.running_attempts() == [], "the executor to forget the attempt")


def test_logs_written_while_the_control_plane_is_down_arrive_complete_and_once(make_executor, plane):
    script = "for i in $(seq 1 30); do echo line $i; sleep 0.05; done"
    make_executor().handle_assignment(assignment(10, ["sh", "-c", script]))
    wait_for(lambda: plane.chunks.get(10), "the first log chunk")
    plane.down = True
    time.sleep(1)
    plane.down = False
    wait_for(lambda: plane.ended(10), "the ended report")
    assert plane.log(10) == "".join(f"line {i}\n" for i in range(1, 31))


def test_a_restarted_agent_adopts_its_container_and_ships_the_rest_without_duplicates(make_executor, plane, node):
    script = "for i in $(seq 1 60); do echo line $i; sleep 0.05; done; exit 4"
    first = make_executor()
    first.handle_assignment(assignment(11, ["sh", "-c", script]))
    wait_for(lambda: plane.chunks.get(11), "the first log chunk")
    first.close()  # the agent stops mid-job; the container runs on
    time.sleep(1)
    second = make_executor()
    second.adopt()
    assert [a.attempt_id for a in second.running_attempts()] == [11]
    ended = wait_for(lambda: plane.ended(11), "the ended report")
    assert (ended["reason"], ended["exit_code"]) == ("exited", 4)
    assert plane.log(11) == "".join(f"line {i}\n" for i in range(1, 61))
    assert [r["state"] for r in plane.reports[11]].count("ended") == 1
    wait_for(lambda: container_gone(node, 11), "the container's removal")


def test_an_exit_while_the_agent_was_down_is_reported_after_adoption(make_executor, plane):
    first = make_executor()
    first.handle_assignment(assignment(12, ["sh", "-c", "sleep 0.5; echo done; exit 5"]))
    wait_for(lambda: plane.reports.get(12), "the running report")
    first.close()
    time.sleep(1.5)
    second = make_executor()
    second.adopt()
    ended = wait_for(lambda: plane.ended(12), "the ended report")
    assert ended["exit_code"] == 5 and plane.log(12) == "done\n"


def test_a_container_created_but_never_started_before_a_restart_is_lost_not_waited_on(make_executor, plane, node):
    first = make_executor()
    api = DockerRunner().client.api
    kwargs = containers.create_kwargs(assignment(14, ["echo", "hi"]), node_name=node, owner=first.owner)
    kwargs.pop("detach", None)
    api.create_container(**_create_container_args({**kwargs, "version": api._version}))  # then the agent died
    first.close()
    second = make_executor()
    second.adopt()
    ended = wait_for(lambda: plane.ended(14), "the ended report")
    assert (ended["reason"], ended["exit_code"]) == ("lost", None)
    assert "between creating the container and starting it" in ended["message"]
    wait_for(lambda: container_gone(node, 14), "the container's removal")


def test_the_reaper_removes_its_own_containers_that_no_attempt_drives(make_executor, node):
    runner = DockerRunner()
    ex = make_executor()
    stray = assignment(13, ["sleep", "60"])
    runner.create_and_start(containers.create_kwargs(stray, node_name=node, owner=ex.owner))
    ex.reap()
    assert container_gone(node, 13)


def test_two_agents_of_the_same_name_on_one_engine_run_side_by_side_and_never_touch_each_others(node, tmp_path):
    planes = [FakeControlPlane(), FakeControlPlane()]
    agents = [
        Executor(client=plane, node_name=node, state_dir=tmp_path / f"agent{i}", stop_grace=1)
        for i, plane in enumerate(planes)
    ]
    try:
        assert agents[0].owner != agents[1].owner
        for i, ex in enumerate(agents):  # the same attempt id on both control planes: the worst case
            ex.handle_assignment(assignment(15, ["sh", "-c", f"sleep 2; echo agent {i}"]))
        for plane in planes:
            wait_for(lambda plane=plane: plane.reports.get(15), "both running reports")
        for ex in agents:
            ex.reap()  # each sees only its own container, which it drives
        third = Executor(client=FakeControlPlane(), node_name=node, state_dir=tmp_path / "agent2", stop_grace=1)
        third.adopt()  # a third agent of that name (another checkout) starting up adopts nothing
        third.reap()
        assert third.running_attempts() == []
        for i, plane in enumerate(planes):
            ended = wait_for(lambda plane=plane: plane.ended(15), "both ended reports")
            assert (ended["reason"], ended["exit_code"]) == ("exited", 0)
            assert plane.log(15) == f"agent {i}\n"
    finally:
        for ex in agents:
            ex.close()


def test_a_container_removed_from_outside_mid_run_ends_lost_saying_it_disappeared(make_executor, plane, node):
    ex = make_executor()
    ex.handle_assignment(assignment(16, ["sh", "-c", "echo started; sleep 60"]))
    wait_for(lambda: plane.chunks.get(16), "the first log chunk")
    found = DockerRunner().find_attempt(owner=ex.owner, attempt_id=16)
    DockerRunner().client.api.remove_container(found.container_id, force=True)  # docker rm -f by someone else
    ended = wait_for(lambda: plane.ended(16), "the ended report")
    assert (ended["reason"], ended["exit_code"]) == ("lost", None)
    assert "container disappeared" in ended["message"]
    assert plane.log(16) == "started\n"


def test_the_env_reaches_the_container_but_never_the_agents_log(make_executor, plane, caplog):
    caplog.set_level(logging.DEBUG)
    secret = f"s3cret-{uuid.uuid4().hex}"
    make_executor().handle_assignment(assignment(14, ["sh", "-c", 'echo "$TOKEN" | wc -c'], env={"TOKEN": secret}))
    wait_for(lambda: plane.ended(14), "the ended report")
    assert plane.log(14).strip() == str(len(secret) + 1)
    assert secret not in caplog.text


def engine_log_bytes(log_path: str) -> int:
    total = 0
    for path in glob.glob(log_path + "*"):  # the live file and its rotated siblings
        try:
            total += os.stat(path).st_size
        except FileNotFoundError:
            pass  # rotated away between the listing and the stat
    return total


def test_a_flood_job_succeeds_and_the_engines_log_files_never_pass_the_bound(make_executor, plane, monkeypatch):
    bound = 1024 * 1024
    monkeypatch.setenv("EULER_NODE_MAX_CONTAINER_LOG_BYTES", str(bound))
    plane.cap = 256 * 1024
    ex = make_executor()
    flood = "yes $(head -c 1000 /dev/zero | tr '\\0' y) | head -c 50000000"  # 50 MB of 1 KB lines, at full speed
    ex.handle_assignment(assignment(17, ["sh", "-c", flood]))
    found = wait_for(lambda: DockerRunner().find_attempt(owner=ex.owner, attempt_id=17), "the container")
    log_path = DockerRunner().client.api.inspect_container(found.container_id)["LogPath"]
    peak = 0
    while not plane.ended(17):
        size = engine_log_bytes(log_path)
        if size > bound:  # a sample taken mid-rotation can count a renamed file twice: look again
            size = min(size, engine_log_bytes(log_path))
        peak = max(peak, size)
        time.sleep(0.005)
    ended = plane.ended(17)
    assert (ended["reason"], ended["exit_code"]) == ("exited", 0)
    assert 0 < peak <= bound


def engine_logs(attempt_id: int, owner: str) -> bytes:
    """What the engine's own copy (json-file) of an attempt's output still holds, read once (a wait polls
    engine_last_line instead)."""
    found = DockerRunner().find_attempt(owner=owner, attempt_id=attempt_id)
    return DockerRunner().client.api.logs(found.container_id, stdout=True, stderr=True)


# The jobs whose output is held back (a small spool, the control plane down) run as long as it is held: on a loaded
# machine past the default 60 s, and the test is of their output, not of their timeout.
OUTPUT_HELD = 600


def engine_last_line(attempt_id: int, owner: str) -> bytes:
    """The last line of the engine's own copy (json-file), read from the file itself (b"" between a rotation and the
    next write). Polled through `docker logs --tail 1` while the job writes fast enough to rotate the file every few
    ms, the engine's log read once hung for two minutes and the whole engine answered nothing until it timed out,
    failing other workers' tests (a daemon frozen by `docker logs --tail`: moby/moby#33710)."""
    found = DockerRunner().find_attempt(owner=owner, attempt_id=attempt_id)
    path = DockerRunner().client.api.inspect_container(found.container_id)["LogPath"]
    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(0, size - 8192))
            lines = fh.read().splitlines()
    except FileNotFoundError:
        return b""
    for raw in reversed(lines):
        try:
            return json.loads(raw)["log"].encode()
        except (ValueError, KeyError):
            continue  # the first, cut by the seek
    return b""


def written_past(last_line: bytes, n: int) -> bool:
    """The `seq` job's last line in the engine's copy says it wrote past line `n` (or it ended: `done`)."""
    line = last_line.strip()
    return line == b"done" or (line.isdigit() and int(line) > n)


def touch(attempt_id: int, owner: str, path: str) -> None:
    found = DockerRunner().find_attempt(owner=owner, attempt_id=attempt_id)
    api = DockerRunner().client.api
    api.exec_start(api.exec_create(found.container_id, ["touch", path])["Id"])


def test_short_lines_as_fast_as_the_container_writes_are_stored_byte_exact_past_a_small_engine_log(
    make_executor, plane, monkeypatch
):
    monkeypatch.setenv("EULER_NODE_MAX_CONTAINER_LOG_BYTES", str(1024 * 1024))
    ex = make_executor(max_spool_bytes=256 * 1024)  # a small spool too: the reader waits, and so does the job
    script = "seq 1 400000; echo done; while [ ! -e /tmp/end ]; do sleep 0.05; done"
    ex.handle_assignment(assignment(20, ["sh", "-c", script], timeout_seconds=OUTPUT_HELD))
    expected = "".join(f"{i}\n" for i in range(1, 400_001)) + "done\n"
    wait_for(lambda: plane.log(20).endswith("done\n"), "the whole output to be shipped", timeout=120)
    held = engine_logs(20, ex.owner)
    assert not held.startswith(b"1\n2\n") and len(held) < len(expected)  # the engine's copy lost its start
    touch(20, ex.owner, "/tmp/end")
    ended = wait_for(lambda: plane.ended(20), "the ended report")
    assert (ended["reason"], ended["exit_code"]) == ("exited", 0)
    assert plane.log(20) == expected and not plane.gaps.get(20)


def test_output_waits_for_an_unreachable_control_plane_instead_of_being_lost(make_executor, plane, monkeypatch):
    monkeypatch.setenv("EULER_NODE_MAX_CONTAINER_LOG_BYTES", str(1024 * 1024))
    ex = make_executor(max_spool_bytes=64 * 1024)
    script = "echo first; while [ ! -e /tmp/go ]; do sleep 0.05; done; seq 1 200000; echo done"
    ex.handle_assignment(assignment(21, ["sh", "-c", script], timeout_seconds=OUTPUT_HELD))
    wait_for(lambda: plane.log(21) == "first\n", "the first line")
    plane.down = True
    touch(21, ex.owner, "/tmp/go")
    # The job writes ~1.3 MB of short lines (~14 MB of engine log) into a 64 KiB spool: the job is held back.
    wait_for(lambda: written_past(engine_last_line(21, ex.owner), 1000), "the job to write")
    assert not plane.ended(21)
    plane.down = False
    ended = wait_for(lambda: plane.ended(21), "the ended report", timeout=120)
    assert (ended["reason"], ended["exit_code"]) == ("exited", 0)
    assert plane.log(21) == "first\n" + "".join(f"{i}\n" for i in range(1, 200_001)) + "done\n"
    assert not plane.gaps.get(21)


def test_a_cancel_stops_a_job_whose_output_waits_for_the_control_plane(make_executor, plane, node):
    ex = make_executor(max_spool_bytes=64 * 1024)
    ex.handle_assignment(assignment(22, ["sh", "-c", "echo first; yes"]))
    wait_for(lambda: plane.log(22).startswith("first\n"), "the first line")
    from nodeagent.attempt_logs import STOPPED_UNREAD

    plane.down = True  # the spool fills, the reader waits, the job's writes block (and the engine could not end it)
    wait_for(lambda: ex._runs[22].shipper.spool_full(), "the spool to fill")
    found = DockerRunner().find_attempt(owner=ex.owner, attempt_id=22)
    ex.handle_command(protocol.Command(type="stop_attempt", attempt_id=22, reason="cancelled"))
    code = DockerRunner().wait(found.container_id)  # the engine's own exit event, while the plane is still down
    assert code == 128 + 15  # SIGTERM through the init, not the kill after the grace
    plane.down = False
    ended = wait_for(lambda: plane.ended(22), "the ended report")
    assert ended["reason"] == "cancelled"
    # `yes` had ~1 MiB waiting in the engine: past twice the spool, the reader let go of it, and said so.
    assert [g["reason"] for g in plane.gaps[22].values()] == [STOPPED_UNREAD]
    wait_for(lambda: container_gone(node, 22), "the container's removal")


def test_a_restart_mid_run_with_both_streams_resumes_each_without_gap_or_duplicate(make_executor, plane):
    script = "for i in $(seq 1 60); do echo out $i; echo err $i >&2; sleep 0.03; done"
    first = make_executor()
    first.handle_assignment(assignment(23, ["sh", "-c", script]))
    wait_for(lambda: plane.chunks.get(23), "the first log chunk")
    first.close()
    second = make_executor()
    second.adopt()
    ended = wait_for(lambda: plane.ended(23), "the ended report")
    assert (ended["reason"], ended["exit_code"]) == ("exited", 0)
    plane.log(23)  # contiguous offsets
    assert plane.stream(23, "stdout") == "".join(f"out {i}\n" for i in range(1, 61))
    assert plane.stream(23, "stderr") == "".join(f"err {i}\n" for i in range(1, 61))
    assert not plane.gaps.get(23)


def test_output_the_engine_rotated_away_while_the_agent_was_down_is_recorded_as_lost(make_executor, plane, monkeypatch):
    from nodeagent.attempt_logs import ROTATED

    monkeypatch.setenv("EULER_NODE_MAX_CONTAINER_LOG_BYTES", str(1024 * 1024))
    script = (
        "echo first; while [ ! -e /tmp/go ]; do sleep 0.05; done; seq 1 200000; echo done;"
        " while [ ! -e /tmp/end ]; do sleep 0.05; done; echo last"
    )
    first = make_executor()
    first.handle_assignment(assignment(24, ["sh", "-c", script], timeout_seconds=OUTPUT_HELD))
    wait_for(lambda: plane.log(24) == "first\n", "the first line")
    first.close()  # the agent is down while the job writes ~14 MB of engine log into a 1 MiB bound
    touch(24, first.owner, "/tmp/go")
    wait_for(lambda: engine_last_line(24, first.owner).endswith(b"done\n"), "the job to write")
    second = make_executor()
    second.adopt()
    wait_for(lambda: plane.log(24).endswith("done\n"), "the rest of the engine's copy")
    touch(24, first.owner, "/tmp/end")
    ended = wait_for(lambda: plane.ended(24), "the ended report")
    assert (ended["reason"], ended["exit_code"]) == ("exited", 0)
    (gap,) = plane.gaps[24].values()
    assert gap["reason"] == ROTATED and gap["bytes"] == 0 and gap["offset"] == len("first\n")
    text = plane.log(24)
    assert text.startswith("first\n") and text.endswith("200000\ndone\nlast\n")
    assert "\n1\n2\n3\n" not in text  # the start of the seq was lost, and is said to be


class CountingRunner(DockerRunner):
    def __init__(self):
        super().__init__()
        self.reopened = 0

    def stamped_logs(self, *args, since_ns=None, **kw):
        self.reopened += since_ns is not None
        return super().stamped_logs(*args, since_ns=since_ns, **kw)


def test_a_followed_engine_log_reopened_at_each_rotation_records_no_false_gap(make_executor, plane, monkeypatch):
    monkeypatch.setenv("EULER_NODE_MAX_CONTAINER_LOG_BYTES", str(1024 * 1024))
    line = "x" * 1000
    # ~60 KB/s on both streams for ~10 s: 5 rotations of the 1 MiB bound's 128 KiB files, at a pace a reader keeps.
    # Docker 20.10 resends the last entries of a file at each rotation: taken once.
    script = (
        f"echo first; while [ ! -e /tmp/go ]; do sleep 0.05; done; i=0; while [ $i -lt 100 ]; do"
        f" echo out $i {line}; echo out $i {line}; echo out $i {line}; echo err $i {line} >&2;"
        f" echo err $i {line} >&2; echo err $i {line} >&2; i=$((i+1)); sleep 0.1; done"
    )
    first = make_executor()
    first.handle_assignment(assignment(25, ["sh", "-c", script]))
    wait_for(lambda: plane.log(25) == "first\n", "the first line")
    first.close()  # from here on the agent reads the engine's log: no attach after a restart
    runner = CountingRunner()
    second = make_executor(runner=runner)
    second.adopt()
    touch(25, first.owner, "/tmp/go")
    ended = wait_for(lambda: plane.ended(25), "the ended report", timeout=120)
    assert (ended["reason"], ended["exit_code"]) == ("exited", 0)
    assert plane.stream(25, "stdout") == "first\n" + "".join(f"out {i} {line}\n" * 3 for i in range(100))
    assert plane.stream(25, "stderr") == "".join(f"err {i} {line}\n" * 3 for i in range(100))
    assert not plane.gaps.get(25)
    assert runner.reopened  # at least once, when the container exited (Docker 20.10 ends none at rotations here)


def test_a_container_an_agent_started_before_dying_is_read_from_the_engines_log(make_executor, plane):
    ex = make_executor()
    job = assignment(26, ["sh", "-c", "for i in $(seq 1 20); do echo line $i; sleep 0.02; done"])
    DockerRunner().create_and_start(containers.create_kwargs(job, node_name=ex.node_name, owner=ex.owner))
    ex.handle_assignment(job)  # the same attempt again: found by name, already started, so no attach
    ended = wait_for(lambda: plane.ended(26), "the ended report")
    assert (ended["reason"], ended["exit_code"]) == ("exited", 0)
    assert plane.log(26) == "".join(f"line {i}\n" for i in range(1, 21)) and not plane.gaps.get(26)


def test_an_attach_that_ends_before_the_container_hands_over_to_the_engines_log(make_executor, plane, caplog):
    caplog.set_level(logging.INFO)
    ex = make_executor()
    script = "echo first; while [ ! -e /tmp/go ]; do sleep 0.05; done; seq 1 1000; echo err >&2"
    ex.handle_assignment(assignment(27, ["sh", "-c", script]))
    wait_for(lambda: plane.log(27) == "first\n", "the first line")
    ex._runs[27].close_reader()  # as if the engine dropped the attach while the job runs on
    wait_for(lambda: "the attach ended before the container" in caplog.text, "the hand-over")
    touch(27, ex.owner, "/tmp/go")
    ended = wait_for(lambda: plane.ended(27), "the ended report")
    assert (ended["reason"], ended["exit_code"]) == ("exited", 0)
    assert plane.stream(27, "stdout") == "first\n" + "".join(f"{i}\n" for i in range(1, 1001))
    assert plane.stream(27, "stderr") == "err\n" and not plane.gaps.get(27)


def test_a_job_started_while_the_control_plane_is_down_is_not_held_by_its_running_report(make_executor, plane):
    plane.down = True
    ex = make_executor()
    ex.handle_assignment(assignment(28, ["sh", "-c", "seq 1 200000"]))  # 1.3 MB: more than the engine would hold
    found = wait_for(lambda: DockerRunner().find_attempt(owner=ex.owner, attempt_id=28), "the container")
    assert DockerRunner().wait(found.container_id) == 0  # it ran to its end while no report could be made
    plane.down = False
    ended = wait_for(lambda: plane.ended(28), "the ended report")
    assert (ended["reason"], ended["exit_code"]) == ("exited", 0)
    assert [r["state"] for r in plane.reports[28]] == ["running", "ended"]
    assert plane.log(28) == "".join(f"{i}\n" for i in range(1, 200_001))
