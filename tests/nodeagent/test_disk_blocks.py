"""Disk that cannot be faked: the writable layer counts by allocated blocks (not apparent size) and by inodes.

`fallocate --keep-size` is not in the test images' busybox (its `fallocate` has no `-k`), so the tests allocate
the blocks from the host, with util-linux's `fallocate --keep-size`, straight into the job's writable layer
(overlay2's UpperDir): the file the job then holds has an apparent size of 0 and 64 MiB of blocks, exactly as if
the job had made it. A million empty files take minutes to create on the shared test machine, so the job below
tries to create a million and the node's inode limit is set to 20,000 (EULER_NODE_JOB_MAX_INODES; default
500,000): the guard stops it there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid

import docker
import pytest

from nodeagent.disk import DiskGuard, size_rw
from nodeagent.disk_limits import inode_message, upper_dir
from nodeagent.disk_walk import tree_usage

from .test_executor import assignment, make_executor, node, plane, wait_for  # noqa: F401, F811

MIB = 1 << 20
IMAGE = "euler-test/busybox"


def keep_size(path: str, length: int) -> None:
    subprocess.run(["fallocate", "--keep-size", "-l", str(length), path], check=True)


needs_fallocate = pytest.mark.skipif(shutil.which("fallocate") is None, reason="needs util-linux fallocate")


@needs_fallocate
def test_a_keep_size_allocation_counts_its_blocks_though_its_size_is_zero(tmp_path):
    blob = tmp_path / "blob"
    blob.touch()
    try:
        keep_size(str(blob), 8 * MIB)
    except subprocess.CalledProcessError:
        pytest.skip("this file system does not support fallocate --keep-size")
    assert os.stat(blob).st_size == 0
    assert tree_usage(str(tmp_path)).bytes >= 8 * MIB


def test_every_entry_counts_as_an_inode_and_hard_links_once(tmp_path):
    for i in range(50):
        (tmp_path / f"f{i}").touch()
    (tmp_path / "d").mkdir()
    os.link(tmp_path / "f0", tmp_path / "d" / "again")
    assert tree_usage(str(tmp_path)).inodes == 51
    assert 10 < tree_usage(str(tmp_path), stop_inodes=10).inodes <= 12  # stops once past the bound
    assert "more than 10 files and directories" in inode_message(11, 10)


@pytest.mark.docker
@needs_fallocate
def test_the_guard_counts_blocks_that_sizerw_does_not_see(docker_engine):
    api = docker.from_env().api
    cid = api.create_container(IMAGE, command=["sleep", "60"], name=f"euler-test-blocks-{uuid.uuid4().hex[:8]}")["Id"]
    try:
        api.start(cid)
        upper = upper_dir(api.inspect_container(cid))
        if upper is None:
            pytest.skip("the storage driver has no upper directory to walk")
        blob = os.path.join(upper, "blob")
        open(blob, "wb").close()
        keep_size(blob, 64 * MIB)
        assert size_rw(api, cid) < MIB  # what the engine reports: the apparent size
        guard = DiskGuard(api, cid, 1 << 40, lambda message: None)
        assert guard.measure() >= 64 * MIB and guard.inodes >= 1
    finally:
        api.remove_container(cid, force=True)


@pytest.mark.docker
@needs_fallocate
def test_a_job_whose_layer_holds_blocks_past_disk_bytes_ends_disk_limit(make_executor, plane):  # noqa: F811
    ex = make_executor()
    ex.handle_assignment(assignment(31, ["sleep", "120"], disk_bytes=32 * MIB))
    running = wait_for(lambda: next((r for r in plane.reports.get(31, []) if r["state"] == "running"), None), "start")
    api = docker.from_env().api
    upper = upper_dir(api.inspect_container(running["container_id"]))
    if upper is None:
        pytest.skip("the storage driver has no upper directory to walk")
    blob = os.path.join(upper, "blob")
    open(blob, "wb").close()
    keep_size(blob, 64 * MIB)  # apparent size 0: SizeRw would count nothing
    ended = wait_for(lambda: plane.ended(31), "the ended report")
    assert ended["reason"] == "disk_limit"
    assert "past its disk_bytes of 33554432" in ended["message"]


@pytest.mark.docker
def test_a_job_creating_a_million_empty_files_is_stopped_at_the_inode_limit(make_executor, plane):  # noqa: F811
    ex = make_executor(max_inodes=20_000)
    flood = "mkdir /f && cd /f && seq 1 1000000 | xargs touch; echo done; sleep 600"
    ex.handle_assignment(assignment(32, ["sh", "-c", flood], disk_bytes=1 << 30, timeout_seconds=900))
    ended = wait_for(lambda: plane.ended(32), "the ended report", timeout=300)
    assert ended["reason"] == "disk_limit"
    assert "more than 20000 files and directories" in ended["message"]
    assert "done" not in plane.log(32)
