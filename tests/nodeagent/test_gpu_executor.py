"""An XID on a GPU that a running attempt holds: the real engine runs the job, the fake NVML throws the XID.

This engine has no NVIDIA runtime, so the container runs without a device request; the run holds its GPU as a
real one does after a restart, by the UUIDs in its record, and the executor watches it from there.
"""

from __future__ import annotations

import threading

import pytest

from nodeagent.gpuwatch import GpuWatch

from .fakenvml import FakeNVML
from .test_executor import assignment, container_gone, make_executor, node, plane, wait_for  # noqa: F401, F811

pytestmark = pytest.mark.docker

GIB = 1 << 30


def test_an_xid_on_its_gpu_ends_the_attempt_gpu_error_naming_the_gpu_and_xid(make_executor, plane, node, tmp_path):  # noqa: F811
    nvml = FakeNVML([
        {"uuid": "GPU-0", "name": "NVIDIA A100-SXM4-80GB", "total": 80 * GIB, "used": 2 * GIB, "util": 90, "ecc": 0},
        {"uuid": "GPU-1", "name": "NVIDIA A100-SXM4-80GB", "total": 80 * GIB, "used": 0, "util": 0, "ecc": 0,
         "procs": [5 * GIB]},
    ])  # fmt: skip
    ex = make_executor()
    stop = threading.Event()
    ex.gpu_watch = GpuWatch(nvml, state_dir=tmp_path, executor=ex).start(stop)
    try:
        ex.handle_assignment(assignment(41, ["sleep", "60"]))
        wait_for(lambda: plane.reports.get(41), "the running report")
        run = ex._runs[41]
        run.record["gpu_uuids"] = ["GPU-1"]
        ex.watch_gpus(run)
        nvml.xid("GPU-1", 79)
        ended = wait_for(lambda: plane.ended(41), "the ended report")
        assert ended["reason"] == "gpu_error" and ended["exit_code"] is not None
        assert "GPU 1 (GPU-1)" in ended["message"] and "XID 79" in ended["message"]
        (stat,) = ended["gpu_stats"]
        assert stat["uuid"] == "GPU-1" and stat["memory_peak_bytes"] == 5 * GIB and stat["memory_source"] == "process"
        wait_for(lambda: container_gone(node, 41), "the container's removal")
        assert ex.gpu_watch.health.reason("GPU-1") == "XID 79" and ex.gpu_watch.health.reason("GPU-0") is None
    finally:
        stop.set()
        ex.gpu_watch.thread.join(timeout=10)


def test_a_job_on_an_unhealthy_gpu_is_stopped_as_soon_as_it_is_watched(make_executor, plane, tmp_path):  # noqa: F811
    nvml = FakeNVML([{"uuid": "GPU-0", "name": "Tesla T4", "total": 15 * GIB, "used": 0, "util": 0, "ecc": 3}])
    ex = make_executor()
    ex.gpu_watch = GpuWatch(nvml, state_dir=tmp_path, executor=ex)
    ex.gpu_watch.health.open()
    ex.gpu_watch.health.check()
    ex.handle_assignment(assignment(42, ["sleep", "60"]))
    wait_for(lambda: plane.reports.get(42), "the running report")
    run = ex._runs[42]
    run.record["gpu_uuids"] = ["GPU-0"]
    ex.watch_gpus(run)
    ended = wait_for(lambda: plane.ended(42), "the ended report")
    assert ended["reason"] == "gpu_error" and "3 uncorrected ECC errors" in ended["message"]


def test_an_attempt_without_gpus_reports_no_gpu_figures(make_executor, plane, tmp_path):  # noqa: F811
    ex = make_executor()
    ex.gpu_watch = GpuWatch(FakeNVML([]), state_dir=tmp_path, executor=ex)
    ex.handle_assignment(assignment(43, ["true"]))
    assert wait_for(lambda: plane.ended(43), "the ended report")["gpu_stats"] == []
