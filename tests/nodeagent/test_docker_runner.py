"""The Docker runner against the real engine: hardened containers, logs in order, OOM, stop, labels."""

from __future__ import annotations

import logging
import threading
import uuid

import docker
import pytest

from nodeagent import containers
from nodeagent.attempt_exit import wait_for_exit
from nodeagent.docker_runner import DockerRunner, RunnerError

pytestmark = pytest.mark.docker

IMAGE = "euler-test/busybox"


@pytest.fixture
def runner(docker_engine):
    r = DockerRunner()
    node = f"t-{uuid.uuid4().hex[:8]}"
    yield r, node
    for c in r.list_managed(node_name=node):
        r.remove(c.container_id)


def spec(node: str, command: list[str], *, attempt_id: int = 1, **over) -> dict:
    a = {
        "attempt_id": attempt_id,
        "job_id": 1,
        "attempt_number": 1,
        "image": IMAGE,
        "command": command,
        "cpu_milli": 500,
        "memory_bytes": 64 * 1024 * 1024,
        "timeout_seconds": 60,
    } | over
    return containers.create_kwargs(a, node_name=node)


def test_it_runs_a_hardened_container_and_reads_its_logs_in_order(runner):
    r, node = runner
    cid = r.create_and_start(spec(node, ["sh", "-c", "echo one; echo two >&2; echo three"]))
    frames = list(r.logs(cid))
    assert r.wait(cid) == 0
    # Docker copies the two pipes independently: the order holds within a stream, and re-reading is stable.
    assert [d for s, d in frames if s == "stdout"] == [b"one\n", b"three\n"]
    assert [d for s, d in frames if s == "stderr"] == [b"two\n"]
    assert list(r.logs(cid)) == frames
    host = r.client.api.inspect_container(cid)["HostConfig"]
    assert host["CapDrop"] == ["ALL"]
    assert host["SecurityOpt"] == ["no-new-privileges:true"]
    assert host["PidsLimit"] == 512
    assert host["Memory"] == host["MemorySwap"] == 64 * 1024 * 1024
    assert host["NanoCpus"] == 500_000_000
    assert host["Privileged"] is False
    assert not host.get("Binds")


def test_it_reports_the_exit_code(runner):
    r, node = runner
    cid = r.create_and_start(spec(node, ["sh", "-c", "exit 3"]))
    assert r.wait(cid) == 3
    state = r.inspect(cid)
    assert state.finished and state.exit_code == 3 and not state.oom_killed


def test_it_detects_an_oom_kill(runner):
    r, node = runner
    # The hog waits for SIGUSR1, sent once its start returned: containerd before 2.2 watches a container's memory
    # cgroup only then, and an OOM in the first milliseconds goes unreported (containerd/containerd#8180; the same
    # wait as test_executor.py's OOM test). It says `ready` once its trap is set.
    hog = "trap 'go=1' USR1; echo ready; while [ -z \"$go\" ]; do sleep 0.05; done; a=$(head -c 200000000 /dev/zero | tr '\\0' x)"
    cid = r.create_and_start(spec(node, ["sh", "-c", hog], memory_bytes=8 * 1024 * 1024))
    container = docker.from_env().containers.get(cid)
    for _ in container.logs(stream=True, follow=True):  # its first line: the trap is set
        break
    container.kill(signal="SIGUSR1")
    # What the agent concludes: the engine's flag, else the kernel's log, else the engine's `oom` event (the engine
    # alone misses kills on a loaded host: containerd drops one whose cgroup is gone before it looks).
    exit_ = wait_for_exit(r, cid, closing=threading.Event(), log=logging.getLogger("t"), attempt_id=1)
    assert exit_.code == 137 and exit_.oom_killed is True


def test_a_missing_executable_is_start_failed_with_dockers_message(runner):
    r, node = runner
    with pytest.raises(RunnerError) as err:
        r.create_and_start(spec(node, ["/no/such/binary"]) | {"init": False})  # with the init: see test_executor
    assert err.value.reason == "start_failed"
    assert "no/such/binary" in err.value.message
    assert r.list_managed(node_name=node) == []


def test_stop_ends_a_sleeping_container_and_remove_deletes_it(runner):
    r, node = runner
    cid = r.create_and_start(spec(node, ["sleep", "60"]))
    r.stop(cid, grace=1)
    assert r.inspect(cid).finished
    r.remove(cid)
    assert r.inspect(cid) is None
    r.remove(cid)  # removing twice is fine


def test_it_lists_and_finds_containers_by_label_and_reuses_an_existing_name(runner):
    r, node = runner
    cid = r.create_and_start(spec(node, ["sleep", "30"], attempt_id=42))
    assert [c.attempt_id for c in r.list_managed(node_name=node)] == [42]
    assert r.list_managed(node_name=node + "-other") == []
    assert r.find_attempt(node_name=node, attempt_id=42).container_id == cid
    assert r.find_attempt(node_name=node, attempt_id=43) is None
    assert r.create_and_start(spec(node, ["sleep", "30"], attempt_id=42)) == cid


def test_an_attach_made_before_the_start_holds_every_byte_and_ends_at_the_exit(runner):
    r, node = runner
    script = "seq 1 100000; echo err >&2; printf 'no newline'"
    cid, attach = r.create_attach_and_start(spec(node, ["sh", "-c", script], attempt_id=7))
    frames = list(attach.frames())  # ends (EOF) once the container's output is closed
    attach.close()
    attach.close()  # closing twice is fine
    assert r.wait(cid) == 0
    assert b"".join(d for s, d in frames if s == "stdout") == b"".join(b"%d\n" % i for i in range(1, 100001)) + (
        b"no newline"
    )
    assert b"".join(d for s, d in frames if s == "stderr") == b"err\n"


def test_a_container_found_already_started_gets_no_attach_and_one_found_created_does(runner):
    r, node = runner
    cid = r.create_and_start(spec(node, ["sleep", "30"], attempt_id=43))  # an agent died after the start
    assert r.create_attach_and_start(spec(node, ["sleep", "30"], attempt_id=43)) == (cid, None)
    created = r.client.api.create_container(**_low_level(spec(node, ["echo", "hi"], attempt_id=44), r))["Id"]
    found, attach = r.create_attach_and_start(spec(node, ["echo", "hi"], attempt_id=44))  # died before the start
    assert found == created and attach is not None
    assert list(attach.frames()) == [("stdout", b"hi\n")]
    attach.close()


def test_closing_an_attach_releases_a_job_that_writes_faster_than_anyone_reads(runner):
    r, node = runner
    cid, attach = r.create_attach_and_start(
        spec(node, ["sh", "-c", "yes $(head -c 1000 /dev/zero | tr '\\0' y) | head -c 20000000"], attempt_id=45)
    )
    next(attach.frames())
    attach.close()  # nothing reads any more: the engine drops the attach and the job's writes go on
    assert r.wait(cid) == 0


def _low_level(kwargs: dict, r: DockerRunner) -> dict:
    from docker.models.containers import _create_container_args

    return _create_container_args(
        {**{k: v for k, v in kwargs.items() if k != "detach"}, "version": r.client.api._version}
    )
