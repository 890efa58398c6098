"""The hostile set under both runtimes: every job here runs once under runc and once under gVisor (runsc), on
the real engine, through the executor as a node runs it. What a job gets (its end, exit code, output, limits) is
asserted, never how long it took. Where gVisor differs on purpose, the test says how (docs/nodes.md).
"""

from __future__ import annotations

import os

import docker
import pytest

from nodeagent import protocol
from nodeagent.runtimes import RuntimePolicy, RuntimeProbe
from tests.conftest import IN_CI

from .test_executor import assignment, container_gone, make_executor, node, plane, wait_for  # noqa: F401

pytestmark = pytest.mark.docker

MIB = 1 << 20
_OFFERED: dict[str, protocol.RuntimeInfo] = {}


class Offered:
    """The executor's view of the node's runtimes: what the real probe found on this engine."""

    def __init__(self, runtimes: list[protocol.RuntimeInfo], min_isolation: str = ""):
        self.runtimes = runtimes
        self.policy = RuntimePolicy(min_isolation=min_isolation)

    def offered(self) -> list[protocol.RuntimeInfo]:
        return list(self.runtimes)


def offered_on_engine() -> dict[str, protocol.RuntimeInfo]:
    if not _OFFERED:
        # A label of its own per xdist worker: the probe reaps its leftovers by it
        probe = RuntimeProbe(docker.from_env(), RuntimePolicy(), owner=f"test-hostile-{os.getpid()}")
        _OFFERED.update({r.name: r for r in probe.refresh()})
    return _OFFERED


@pytest.fixture(params=["runc", "runsc"])
def runtime(request, docker_engine) -> protocol.RuntimeInfo:
    found = offered_on_engine().get(request.param)
    if found is None:
        if IN_CI:
            pytest.fail(f"{request.param} is not offered by this engine (.ci/run registers runsc)")
        pytest.skip(f"{request.param} is not offered by this engine (scripts/register-runsc.sh)")
    return found


@pytest.fixture
def run(make_executor, plane, runtime):  # noqa: F811
    """Start an assignment under the runtime; returns the executor."""
    ex = make_executor()
    ex.runtimes = Offered(list(offered_on_engine().values()))

    def start(attempt_id: int, command: list[str], **over):
        isolation = "sandbox" if runtime.sandbox else "runc"
        over = {"runtime": runtime.name, "isolation": isolation, "network": "none"} | over
        ex.handle_assignment(assignment(attempt_id, command, **over))
        return ex

    return start


def _inspect(node_name: str, attempt_id: int) -> dict:
    client = docker.from_env()
    labels = [f"{protocol.LABEL_ATTEMPT}={attempt_id}", f"{protocol.LABEL_NODE}={node_name}"]
    (c,) = client.api.containers(all=True, filters={"label": labels})
    return client.api.inspect_container(c["Id"])


def test_it_runs_under_the_assigned_runtime_says_so_and_keeps_its_exit_code(run, plane, node, runtime):  # noqa: F811
    run(101, ["sh", "-c", "echo on; sleep 2; echo bye >&2; exit 3"])
    running = wait_for(lambda: plane.reports.get(101), "the running report")[0]
    assert running["runtime"] == runtime.name
    host = _inspect(node, 101)["HostConfig"]
    assert host["Runtime"] == runtime.name
    # gVisor's own tasks share the job's pids cgroup: its limit is scaled (containers.SANDBOX_PIDS_FACTOR).
    assert host["PidsLimit"] == 512 * (8 if runtime.sandbox else 1)
    ended = wait_for(lambda: plane.ended(101), "the ended report")
    assert (ended["reason"], ended["exit_code"]) == ("exited", 3)
    assert plane.stream(101, "stdout") == "on\n" and plane.stream(101, "stderr") == "bye\n"
    wait_for(lambda: container_gone(node, 101), "the container's removal")


def test_a_fork_bomb_is_held_by_the_pids_limit(run, plane, node, runtime):  # noqa: F811
    # 300 processes against a limit of 32: runc refuses the forks past it (the job goes on and says how many it
    # got); under gVisor the sandbox itself is then out of host tasks and the job ends at once, non-zero.
    bomb = "n=0; while [ $n -lt 300 ]; do sleep 60 & n=$((n+1)); done 2>/dev/null; echo started all 300"
    run(102, ["sh", "-c", bomb], pids_limit=32, memory_bytes=512 * MIB, timeout_seconds=30)
    ended = wait_for(lambda: plane.ended(102), "the ended report", timeout=120)
    assert "started all 300" not in plane.log(102)
    assert ended["reason"] in ("exited", "timeout") and ended["exit_code"] != 0
    wait_for(lambda: container_gone(node, 102), "the container's removal")


def test_an_output_flood_is_stored_byte_exact(run, plane):  # noqa: F811
    run(103, ["seq", "1", "100000"])
    ended = wait_for(lambda: plane.ended(103), "the ended report", timeout=120)
    assert (ended["reason"], ended["exit_code"]) == ("exited", 0)
    assert plane.log(103) == "".join(f"{i}\n" for i in range(1, 100_001))


def test_a_job_writing_past_disk_bytes_ends_disk_limit(run, plane, node):  # noqa: F811
    job = ["sh", "-c", "dd if=/dev/zero of=/fill bs=1M count=48 2>/dev/null; echo written; sleep 60"]
    run(104, job, disk_bytes=16 * MIB)
    ended = wait_for(lambda: plane.ended(104), "the ended report", timeout=120)
    assert ended["reason"] == "disk_limit", ended
    wait_for(lambda: container_gone(node, 104), "the container's removal")


def test_a_job_ignoring_sigterm_is_killed_after_the_grace_and_ends_cancelled(run, plane, node):  # noqa: F811
    ex = run(105, ["sh", "-c", "trap '' TERM; echo ready; while true; do sleep 1; done"])
    wait_for(lambda: "ready" in plane.log(105), "the job's first line")
    ex.handle_command(protocol.Command(type="stop_attempt", attempt_id=105, reason="cancelled"))
    ended = wait_for(lambda: plane.ended(105), "the ended report")
    assert ended["reason"] == "cancelled" and ended["exit_code"] == 137  # SIGKILL after the 1 s grace
    wait_for(lambda: container_gone(node, 105), "the container's removal")


def test_a_cancelled_sleep_ends_by_sigterm_through_the_init(run, plane, node, runtime):  # noqa: F811
    """Under runc through Docker's init (PID 1 ignores a signal it does not handle); under gVisor, which gives PID 1
    no such shield, the job itself is PID 1 (containers.create_kwargs)."""
    ex = run(106, ["sleep", "120"])
    wait_for(lambda: plane.reports.get(106), "the running report")
    assert _inspect(node, 106)["HostConfig"]["Init"] is (not runtime.sandbox)
    ex.handle_command(protocol.Command(type="stop_attempt", attempt_id=106, reason="cancelled"))
    ended = wait_for(lambda: plane.ended(106), "the ended report")
    assert ended["reason"] == "cancelled" and ended["exit_code"] == 143
    wait_for(lambda: container_gone(node, 106), "the container's removal")


def test_an_oom_kill_is_reported_as_oom(run, plane):  # noqa: F811
    # 64 KiB strings kept in ever more variables: memory grows with hardly a system call (a pipe-fed hog is slow
    # under gVisor), in small allocations: a string doubled in place asks at last for one block past the limit,
    # which gVisor may refuse (the shell then exits "out of memory" by itself) before the cgroup's OOM kill.
    hog = 'x=$(head -c 65536 /dev/zero | tr "\\0" x); i=0; while true; do eval "v$i=\\$x"; i=$((i+1)); done'
    run(107, ["sh", "-c", hog], memory_bytes=64 * MIB, timeout_seconds=300)
    assert wait_for(lambda: plane.ended(107), "the ended report", timeout=120)["reason"] == "oom"


def test_a_network_none_job_has_loopback_only(run, plane):  # noqa: F811
    run(108, ["sh", "-c", "cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '"])
    ended = wait_for(lambda: plane.ended(108), "the ended report")
    assert ended["exit_code"] == 0 and plane.log(108).split() == ["lo"]


def test_the_agent_refuses_a_weaker_runtime_than_the_job_needs(make_executor, plane):  # noqa: F811
    ex = make_executor()
    ex.runtimes = Offered(list(offered_on_engine().values()), min_isolation="sandbox")
    ex.handle_assignment(assignment(109, ["true"], runtime="runc", isolation="runc", network="none"))
    ended = wait_for(lambda: plane.ended(109), "the ended report")
    assert ended["reason"] == "start_failed" and "lender requires a sandbox" in ended["message"]
    assert [r["state"] for r in plane.reports[109]] == ["ended"]  # nothing ran
