"""The probe against a fake NVML (the boundary), fake cgroup files and the real psutil."""

import psutil

from nodeagent import probe

from .fakenvml import FakeNVML, NoNVML


def test_gpus_are_read_through_nvml_with_uuid_index_model_memory_and_utilization():
    nvml = FakeNVML([
        {"uuid": "GPU-aaaa", "name": "NVIDIA H100 80GB HBM3", "total": 80 << 30, "used": 1 << 30, "util": 42},
        {"uuid": "GPU-bbbb", "name": b"NVIDIA A10", "total": 24 << 30, "used": 0, "util": None},
    ])  # fmt: skip
    gpus = probe.GpuProbe(nvml).gpus()
    assert [(g.uuid, g.index, g.model) for g in gpus] == [
        ("GPU-aaaa", 0, "NVIDIA H100 80GB HBM3"),
        ("GPU-bbbb", 1, "NVIDIA A10"),
    ]
    assert gpus[0].memory_bytes == 80 << 30 and gpus[0].memory_used_bytes == 1 << 30 and gpus[0].utilization == 42
    assert gpus[1].utilization == 0


def test_nvml_is_initialised_once():
    nvml = FakeNVML([])
    p = probe.GpuProbe(nvml)
    p.gpus()
    p.gpus()
    assert nvml.inited == 1


def test_without_nvml_there_are_zero_gpus_logged_once_and_no_error(caplog):
    p = probe.GpuProbe(NoNVML())
    with caplog.at_level("INFO", logger="euler.nodeagent.probe"):
        assert p.gpus() == [] and p.gpus() == []
    assert len([r for r in caplog.records if "NVML unavailable" in r.getMessage()]) == 1


def test_cgroup_v2_limits_cap_cpus_and_memory(tmp_path):
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    (tmp_path / "memory.max").write_text(str(512 << 20) + "\n")
    assert probe.cpu_milli(tmp_path) == min(1500, (psutil.cpu_count() or 1) * 1000)
    assert probe.memory_bytes(tmp_path) == min(512 << 20, psutil.virtual_memory().total)


def test_no_cgroup_limit_means_the_whole_machine(tmp_path):
    (tmp_path / "cpu.max").write_text("max 100000\n")
    (tmp_path / "memory.max").write_text("max\n")
    assert probe.cpu_milli(tmp_path) == (psutil.cpu_count() or 1) * 1000
    assert probe.memory_bytes(tmp_path) == psutil.virtual_memory().total


def test_cgroup_v1_files_are_understood(tmp_path):
    (tmp_path / "cpu").mkdir()
    (tmp_path / "memory").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("50000\n")
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    (tmp_path / "memory" / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    assert probe.cpu_milli(tmp_path) == 500
    assert probe.memory_bytes(tmp_path) == psutil.virtual_memory().total


def test_the_resources_fit_the_protocol(tmp_path):
    p = probe.Probe(gpu_probe=probe.GpuProbe(FakeNVML([])), cgroup_root=tmp_path)
    res = p.resources()
    assert res.cpu_milli > 0 and res.memory_bytes > 0 and res.gpus == []
