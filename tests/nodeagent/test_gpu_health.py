"""GPU health and per-job GPU figures against the fake NVML: XID events, ECC counters, resets, samples."""

from __future__ import annotations

import threading

from nodeagent import gpuhealth, protocol
from nodeagent.gpustats import Figures, GpuStats
from nodeagent.gpuwatch import GpuWatch

from .fakenvml import FakeNVML

GIB = 1 << 30


def cards(**over):
    base = [
        {"uuid": "GPU-a", "name": "NVIDIA A100-SXM4-80GB", "total": 80 * GIB, "used": GIB, "util": 50, "ecc": 0},
        {"uuid": "GPU-b", "name": "NVIDIA A100-SXM4-80GB", "total": 80 * GIB, "used": 0, "util": 0, "ecc": 0},
    ]
    for card in base:
        card.update(over.get(card["uuid"], {}))
    return base


def health(nvml, tmp_path=None):
    seen = []
    h = gpuhealth.GpuHealth(nvml, lambda u, r: seen.append((u, r)),
                            state_file=tmp_path / "gpu-health.json" if tmp_path else None)  # fmt: skip
    h.open()
    return h, seen


def test_a_critical_xid_marks_its_gpu_unhealthy_and_says_why():
    nvml = FakeNVML(cards())
    h, seen = health(nvml)
    assert nvml.registered == [("GPU-a", 0x8), ("GPU-b", 0x8)]
    nvml.xid("GPU-b", 79)
    h.wait_events(1000)
    assert seen == [("GPU-b", "XID 79")] and h.reason("GPU-b") == "XID 79" and h.reason("GPU-a") is None


def test_an_application_xid_marks_nothing():
    nvml = FakeNVML(cards())
    h, seen = health(nvml)
    nvml.xid("GPU-a", 13)  # graphics engine exception: the job's own fault
    h.wait_events(1000)
    h.wait_events(10)  # a timeout is not an event
    assert seen == [] and h.marks == {}


def test_uncorrected_ecc_errors_and_a_lost_gpu_mark_it():
    nvml = FakeNVML(cards(**{"GPU-a": {"ecc": 2}, "GPU-b": {"lost": True}}))
    h, seen = health(nvml)
    h.check()
    assert h.marks == {"GPU-a": "2 uncorrected ECC errors (volatile)", "GPU-b": "GPU is lost (fallen off the bus)"}
    h.check()
    assert len(seen) == 2  # once per mark


def test_a_card_without_ecc_is_not_marked():
    h, _ = health(FakeNVML(cards(**{"GPU-a": {"ecc": None}})))
    h.check()
    assert h.marks == {}


def test_the_heartbeat_reports_health_with_its_reason():
    nvml = FakeNVML(cards())
    h, _ = health(nvml)
    h.mark("GPU-a", "XID 48")
    gpus = [protocol.GpuInfo(uuid=c["uuid"], index=i, memory_bytes=c["total"]) for i, c in enumerate(nvml.cards)]
    out = h.annotate(gpus)
    assert [(g.healthy, g.health_reason) for g in out] == [(False, "XID 48"), (True, "")]
    assert protocol.Heartbeat(resources=protocol.Resources(cpu_milli=1, memory_bytes=1, gpus=out))  # fits the wire


def test_a_reset_clears_an_xid_mark_once_per_number():
    nvml = FakeNVML(cards())
    h, _ = health(nvml)
    h.mark("GPU-a", "XID 79")
    assert h.apply_resets({"GPU-a": 1}) == ["GPU-a"] and h.reason("GPU-a") is None
    h.mark("GPU-a", "XID 79")  # it happens again
    assert h.apply_resets({"GPU-a": 1}) == [] and h.reason("GPU-a") == "XID 79"  # the same reset: applied already
    assert h.apply_resets({"GPU-a": 2}) == ["GPU-a"] and h.reason("GPU-a") is None


def test_a_reset_of_a_gpu_whose_fault_is_still_there_marks_it_again():
    nvml = FakeNVML(cards(**{"GPU-b": {"ecc": 1}}))
    h, seen = health(nvml)
    h.check()
    h.apply_resets({"GPU-b": 1})
    assert h.reason("GPU-b") == "1 uncorrected ECC error (volatile)" and len(seen) == 2
    nvml.cards[1]["ecc"] = 0  # the GPU was reset (nvidia-smi -r): the volatile count is back to 0
    h.apply_resets({"GPU-b": 2})
    assert h.reason("GPU-b") is None


def test_marks_and_resets_outlive_an_agent_restart(tmp_path):
    nvml = FakeNVML(cards())
    h, _ = health(nvml, tmp_path)
    h.mark("GPU-a", "XID 95")
    h.apply_resets({"GPU-b": 3})
    again, _ = health(nvml, tmp_path)
    assert again.reason("GPU-a") == "XID 95" and again.resets == {"GPU-b": 3}
    assert again.apply_resets({"GPU-b": 3}) == []


# --- per-job figures ------------------------------------------------------------------------------
def test_figures_average_utilisation_and_keep_the_peak_memory_and_its_source():
    f = Figures("GPU-a")
    f.add(20, 3 * GIB, per_process=True)
    f.add(80, 5 * GIB, per_process=True)
    f.add(110, 4 * GIB, per_process=False)
    stat = f.stat()
    assert (stat.samples, stat.utilization_avg, stat.utilization_max) == (3, 66.7, 100.0)  # 110 counts as 100
    assert (stat.memory_peak_bytes, stat.memory_source) == (5 * GIB, "process")


def test_samples_use_the_processes_memory_when_nvml_gives_it_else_the_devices():
    nvml = FakeNVML(cards(**{"GPU-a": {"procs": [GIB, 2 * GIB]}, "GPU-b": {"procs": [None], "used": 7 * GIB}}))
    stats = GpuStats(nvml)
    stats.start(5, ["GPU-a", "GPU-b"])
    nvml.cards[0]["util"] = 100
    stats.sample()
    got = {s.uuid: s for s in stats.finish(5)}
    assert got["GPU-a"].memory_peak_bytes == 3 * GIB and got["GPU-a"].memory_source == "process"
    assert got["GPU-a"].utilization_max == 100 and got["GPU-a"].samples == 3  # start, sample, finish
    assert got["GPU-b"].memory_peak_bytes == 7 * GIB and got["GPU-b"].memory_source == "device"
    assert stats.finish(5) == [] and stats.finish(6) == []


def test_the_watch_thread_turns_an_xid_into_a_stop_of_the_attempts_on_that_gpu(tmp_path):
    nvml = FakeNVML(cards())

    class Executor:
        def __init__(self):
            self.stopped = threading.Event()
            self.calls = []

        def gpu_unhealthy(self, uuid, reason, index):
            self.calls.append((uuid, reason, index))
            self.stopped.set()

    ex, stop = Executor(), threading.Event()
    watch = GpuWatch(nvml, state_dir=tmp_path, executor=ex).start(stop)
    try:
        nvml.xid("GPU-b", 48)
        assert ex.stopped.wait(30)
        assert ex.calls == [("GPU-b", "XID 48", 1)]
    finally:
        stop.set()
        watch.thread.join(timeout=10)
