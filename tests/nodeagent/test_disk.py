"""A job's disk on the real engine: past `disk_bytes` it is stopped and ends `disk_limit`; below, it runs on."""

from __future__ import annotations

import pytest

from nodeagent.disk import limit_message, over_limit

from .test_executor import assignment, container_gone, make_executor, node, plane, wait_for  # noqa: F401, F811

MIB = 1 << 20


def test_over_limit_counts_only_a_measured_layer_past_a_set_limit():
    assert over_limit(17 * MIB, 16 * MIB)
    assert not over_limit(16 * MIB, 16 * MIB)
    assert not over_limit(None, 16 * MIB)
    assert not over_limit(1 << 40, 0)  # 0: not limited (a job older than the field)
    assert "past its disk_bytes of 16" in limit_message(17, 16)


@pytest.mark.docker
def test_a_job_writing_past_disk_bytes_ends_disk_limit_and_is_removed(make_executor, plane, node):  # noqa: F811
    ex = make_executor()
    job = ["sh", "-c", "echo writing; dd if=/dev/zero of=/fill bs=1M count=48 2>/dev/null; echo written; sleep 60"]
    ex.handle_assignment(assignment(31, job, disk_bytes=16 * MIB))
    ended = wait_for(lambda: plane.ended(31), "the ended report")
    assert ended["reason"] == "disk_limit", ended
    assert "past its disk_bytes of 16777216" in ended["message"]
    wait_for(lambda: container_gone(node, 31), "the container's removal")
    assert ex.disk_used() == 0


@pytest.mark.docker
def test_a_job_within_disk_bytes_succeeds(make_executor, plane):  # noqa: F811
    ex = make_executor()
    job = ["sh", "-c", "dd if=/dev/zero of=/fill bs=1M count=2 2>/dev/null && echo ok"]
    ex.handle_assignment(assignment(32, job, disk_bytes=16 * MIB))
    ended = wait_for(lambda: plane.ended(32), "the ended report")
    assert ended["reason"] == "exited" and ended["exit_code"] == 0
    assert plane.log(32) == "ok\n"
