"""A job's disk on the real engine: past `disk_bytes` it is stopped and ends `disk_limit`; below, it runs on.

What counts is the writable layer plus the anonymous volumes of the image's VOLUMEs (walked by `tree_bytes`).
"""

from __future__ import annotations

import io
import os

import docker
import pytest
from docker import errors as derrors

from nodeagent.disk import remove_volumes
from nodeagent.disk_limits import limit_message, next_check_in, over_limit, volume_mounts
from nodeagent.disk_walk import Unmeasurable, tree_bytes

from .test_executor import assignment, container_gone, make_executor, node, plane, wait_for  # noqa: F401, F811

MIB = 1 << 20
VOLUME_IMAGE = "euler-test/busybox-volume"  # built here from the offline base: `VOLUME ["/data"]`


@pytest.fixture(scope="module")
def volume_image(docker_engine):
    client = docker.from_env()
    dockerfile = io.BytesIO(b'FROM euler-test/busybox\nVOLUME ["/data"]\n')
    client.images.build(fileobj=dockerfile, tag=VOLUME_IMAGE, rm=True, pull=False)
    yield VOLUME_IMAGE
    client.close()


def test_next_check_keeps_measuring_within_its_share_of_the_time():
    assert next_check_in(0.005) == 1.0  # a quick measurement: every second
    assert next_check_in(2.0) == pytest.approx(8.0)  # a slow walk (millions of files): at most 20 % of the time
    assert next_check_in(0.5, interval=0.1) == pytest.approx(2.0)


def test_volume_mounts_are_the_containers_volume_sources_only():
    attrs = {
        "Mounts": [
            {"Type": "volume", "Name": "abc", "Destination": "/data", "Source": "/var/lib/docker/volumes/abc/_data"},
            {"Type": "tmpfs", "Destination": "/tmp", "Source": ""},
            {"Type": "bind", "Destination": "/etc/x", "Source": "/etc/x"},
        ]
    }
    assert volume_mounts(attrs) == [("/data", "/var/lib/docker/volumes/abc/_data", "abc")]
    assert volume_mounts({"Mounts": None}) == []


def test_tree_bytes_counts_allocated_blocks_once_and_never_follows_a_symlink(tmp_path):
    root = tmp_path / "vol"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "f").write_bytes(b"x" * MIB)
    before = tree_bytes(str(root))
    os.link(root / "a" / "b" / "f", root / "hardlink")  # the same inode: counted once
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "big").write_bytes(b"y" * 4 * MIB)
    os.symlink(outside, root / "to-outside")  # the job cannot make the agent count (or walk) the host
    with open(root / "sparse", "wb") as f:
        f.truncate(1 << 40)  # 1 TiB apparent, nothing allocated
    assert MIB <= before <= tree_bytes(str(root)) < before + 64 * 1024  # a symlink's target may take a block


def test_tree_bytes_stops_walking_once_past_the_bound_it_is_given(tmp_path):
    for i in range(4):
        (tmp_path / f"d{i}").mkdir()
        (tmp_path / f"d{i}" / "f").write_bytes(b"x" * MIB)
    everything = tree_bytes(str(tmp_path))
    assert everything >= 4 * MIB
    partial = tree_bytes(str(tmp_path), stop_above=MIB + 1)
    assert MIB + 1 < partial < everything
    assert tree_bytes(str(tmp_path / "d0"), stop_above=1000) > 1000  # passed while scanning the root itself


def test_tree_bytes_sees_past_path_max_but_not_past_its_depth_limit(tmp_path):
    root = tmp_path / "vol"
    root.mkdir()
    fd = os.open(root, os.O_RDONLY)
    for _ in range(200):  # 200 levels of 40-character names: a path of 8 KiB, past PATH_MAX (4 KiB)
        os.mkdir("d" * 40, dir_fd=fd)
        child = os.open("d" * 40, os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = child
    hidden = os.open("hidden", os.O_WRONLY | os.O_CREAT, dir_fd=fd)
    os.write(hidden, b"z" * 2 * MIB)
    os.close(hidden)
    os.close(fd)
    assert tree_bytes(str(root), max_depth=256) >= 2 * MIB
    with pytest.raises(Unmeasurable, match="deeper than 128 levels"):
        tree_bytes(str(root), max_depth=128)
    with pytest.raises(Unmeasurable, match="cannot open"):
        tree_bytes(str(tmp_path / "missing"))


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
    wait_for(lambda: ex.disk_used() == 0, "the disk guard let go (the run finished after the removal)")


@pytest.mark.docker
def test_a_job_within_disk_bytes_succeeds(make_executor, plane):  # noqa: F811
    ex = make_executor()
    job = ["sh", "-c", "dd if=/dev/zero of=/fill bs=1M count=2 2>/dev/null && echo ok"]
    ex.handle_assignment(assignment(32, job, disk_bytes=16 * MIB))
    ended = wait_for(lambda: plane.ended(32), "the ended report")
    assert ended["reason"] == "exited" and ended["exit_code"] == 0
    assert plane.log(32) == "ok\n"


def _volume_of(container_id: str) -> str:
    client = docker.from_env()
    try:
        mounts = client.api.inspect_container(container_id)["Mounts"]
    finally:
        client.close()
    names = [m["Name"] for m in mounts if m["Type"] == "volume"]
    assert len(names) == 1, mounts
    return names[0]


def _volume_exists(name: str) -> bool:
    client = docker.from_env()
    try:
        client.api.inspect_volume(name)
        return True
    except derrors.NotFound:
        return False
    finally:
        client.close()


def _open_gate(container_id: str) -> None:
    client = docker.from_env()
    try:
        exec_id = client.api.exec_create(container_id, ["touch", "/tmp/go"])["Id"]
        client.api.exec_start(exec_id)
    finally:
        client.close()


GATED = "until [ -e /tmp/go ]; do sleep 0.05; done; "  # the test reads the volume's name before the job writes


@pytest.mark.docker
def test_a_job_writing_past_disk_bytes_into_an_image_volume_ends_disk_limit_and_its_volume_is_removed(
    make_executor,  # noqa: F811
    plane,  # noqa: F811
    node,  # noqa: F811
    volume_image,
):
    ex = make_executor()
    job = ["sh", "-c", GATED + "dd if=/dev/zero of=/data/fill bs=1M count=48 2>/dev/null; echo written; sleep 60"]
    ex.handle_assignment(assignment(33, job, image=volume_image, disk_bytes=16 * MIB))
    running = wait_for(lambda: (plane.reports.get(33) or [None])[0], "the running report")
    volume = _volume_of(running["container_id"])
    _open_gate(running["container_id"])
    ended = wait_for(lambda: plane.ended(33), "the ended report")
    assert ended["reason"] == "disk_limit", ended
    assert "past its disk_bytes of 16777216" in ended["message"]
    wait_for(lambda: container_gone(node, 33), "the container's removal")
    assert not _volume_exists(volume), "the anonymous volume outlived its container"
    wait_for(lambda: ex.disk_used() == 0, "the disk guard let go (the run finished after the removal)")


@pytest.mark.docker
def test_the_writable_layer_and_the_volume_count_together(make_executor, plane, volume_image):  # noqa: F811
    ex = make_executor()
    write = "dd if=/dev/zero of=/fill bs=1M count=10 2>/dev/null; dd if=/dev/zero of=/data/fill bs=1M count=10"
    job = ["sh", "-c", write + " 2>/dev/null; echo written; sleep 60"]  # 10 MiB each: 20 MiB, past 16 MiB
    ex.handle_assignment(assignment(34, job, image=volume_image, disk_bytes=16 * MIB))
    ended = wait_for(lambda: plane.ended(34), "the ended report")
    assert ended["reason"] == "disk_limit", ended


@pytest.mark.docker
def test_a_job_within_disk_bytes_on_a_volume_image_succeeds(make_executor, plane, volume_image):  # noqa: F811
    ex = make_executor()
    job = ["sh", "-c", "dd if=/dev/zero of=/data/fill bs=1M count=2 2>/dev/null && echo ok"]
    ex.handle_assignment(assignment(35, job, image=volume_image, disk_bytes=16 * MIB))
    ended = wait_for(lambda: plane.ended(35), "the ended report")
    assert ended["reason"] == "exited" and ended["exit_code"] == 0
    assert plane.log(35) == "ok\n"


@pytest.mark.docker
def test_where_the_agent_cannot_read_dockers_volumes_an_image_volume_is_a_tmpfs(make_executor, plane, volume_image):  # noqa: F811
    ex = make_executor()
    ex.volume_access.readable = False  # as for an agent that is not root, or in a container without the data root
    job = ["sh", "-c", "grep ' /data ' /proc/mounts | cut -d' ' -f1,3"]
    ex.handle_assignment(assignment(36, job, image=volume_image, disk_bytes=16 * MIB))
    ended = wait_for(lambda: plane.ended(36), "the ended report")
    assert ended["reason"] == "exited" and ended["exit_code"] == 0
    assert plane.log(36) == "tmpfs tmpfs\n"  # no anonymous volume on the lender's disk


@pytest.mark.docker
def test_a_volume_left_by_a_container_removed_from_outside_goes_once_the_run_is_over(
    make_executor,  # noqa: F811
    plane,  # noqa: F811
    volume_image,
):
    ex = make_executor()
    ex.handle_assignment(assignment(37, ["sleep", "60"], image=volume_image, disk_bytes=16 * MIB))
    running = wait_for(lambda: (plane.reports.get(37) or [None])[0], "the running report")
    volume = _volume_of(running["container_id"])
    wait_for(lambda: volume in getattr(ex._disk_guards.get(37), "volumes", ()), "the guard's first measurement")
    client = docker.from_env()
    try:
        client.api.remove_container(running["container_id"], force=True)  # `docker rm -f`, without -v
    finally:
        client.close()
    ended = wait_for(lambda: plane.ended(37), "the ended report")
    assert ended["reason"] == "lost", ended
    wait_for(lambda: not _volume_exists(volume), "the leftover volume's removal")


class _Engine:
    """remove_volume answers from a script: 409 (in use) until the engine lets the volume go."""

    def __init__(self, answers):
        self.answers, self.calls = list(answers), 0

    def remove_volume(self, name):
        self.calls += 1
        answer = self.answers.pop(0)
        if answer != 204:
            raise derrors.APIError("in use" if answer == 409 else "gone", response=_Response(answer))


class _Response:
    def __init__(self, status):
        self.status_code = status
        self.reason = ""


def test_a_volume_still_held_a_moment_after_its_container_went_is_asked_again():
    engine = _Engine([409, 409, 204])
    remove_volumes(engine, ["v1"], wait=10, sleep=lambda s: None)
    assert engine.calls == 3


def test_a_volume_held_past_the_wait_is_left_in_place():
    engine = _Engine([409] * 50)
    remove_volumes(engine, ["v1"], wait=0.3)
    assert 2 <= engine.calls < 50  # asked again, then given up on: no error
