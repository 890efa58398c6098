"""The kernel's log as the source of an OOM kill the engine did not report: records parsed (pure), the real log."""

import os

import docker
import pytest

from nodeagent.kernel_oom import kernel_reports_oom_kill, killed_in, read_records

CID = "35413a12dce336a88159c21b27f4b80958ca3d6919c019ccac823c453f880081"
OTHER = "07996c6d9aeba24714b2577751fff4a671e52cf28ea08b44eaf9368a5936786c"


def summary(cid: str, *, pri: int = 3, cgroup: str = "/docker/{}") -> str:
    path = cgroup.format(cid)
    return (
        f"{pri},5012,1261826118,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset={cid},mems_allowed=0,"
        f"oom_memcg={path},task_memcg={path},task=sh,pid=9216,uid=0"
    )


def test_an_oom_kill_summary_naming_the_containers_memory_cgroup_is_found():
    assert killed_in([summary(CID)], CID)
    assert killed_in(["6,1,2,-;eth0: link up", summary(OTHER), summary(CID)], CID)
    assert killed_in([summary(CID, cgroup="/system.slice/docker-{}.scope")], CID)  # the systemd cgroup driver


def test_other_containers_other_records_and_forged_records_are_not_an_oom_kill():
    assert not killed_in([summary(OTHER)], CID)
    assert not killed_in([f"3,9,9,-;Memory cgroup out of memory: Killed process 9216 (sh) {CID}"], CID)
    assert not killed_in([summary(CID, pri=12)], CID)  # user facility: written by a process, not the kernel
    assert not killed_in([summary(CID)], CID[:12])  # a short id could be another container's prefix
    assert not killed_in(["garbage", "", ";oom-kill:" + CID], CID)


def test_an_unreadable_log_is_none_not_false(tmp_path):
    assert kernel_reports_oom_kill(CID, path=str(tmp_path / "no-such-device")) is None


@pytest.mark.docker
@pytest.mark.skipif(not os.access("/dev/kmsg", os.R_OK), reason="the kernel's log is not readable here")
def test_a_real_oom_kill_is_in_the_kernels_log_and_a_plain_exit_is_not(docker_engine):
    # The kernel writes at most 10 summaries in 5 s, host-wide: the suite's few OOM tests stay far below that (a
    # stress of 60 OOM kills a minute on 4 workers lost one here: the agent then asks the engine, as it must).
    client = docker.from_env()
    hog = client.containers.run(
        "euler-test/busybox", ["sh", "-c", "a=$(head -c 200000000 /dev/zero | tr '\\0' x)"], detach=True,
        mem_limit="8m", memswap_limit="8m", network_mode="none", labels={"euler.test": "kernel-oom"},
    )  # fmt: skip
    plain = client.containers.run("euler-test/busybox", ["true"], detach=True, network_mode="none")
    try:
        assert hog.wait()["StatusCode"] == 137
        assert plain.wait()["StatusCode"] == 0
        assert kernel_reports_oom_kill(hog.id) is True
        assert kernel_reports_oom_kill(plain.id) is False
        assert read_records()  # oldest first, one line each
    finally:
        hog.remove(force=True)
        plain.remove(force=True)
