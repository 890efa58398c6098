"""bench/gpu_probe.py, the prepared device check, run here against the fake NVML: every check passes and it
prints JSON; without NVML it says so and exits 1."""

import json

from bench import gpu_probe

from .fakenvml import FakeNVML, NoNVML

GIB = 1 << 30


def test_the_device_check_passes_on_a_fake_a100_and_prints_json(capsys):
    nvml = FakeNVML([
        {"uuid": "GPU-a", "name": "NVIDIA A100-SXM4-80GB", "total": 80 * GIB, "used": GIB, "util": 30, "ecc": 0},
        {"uuid": "GPU-b", "name": "Tesla T4", "total": 15 * GIB, "used": 0, "util": 0},
    ])  # fmt: skip
    assert gpu_probe.main(["--model", "A100*", "--min-memory-gib", "40"], nvml=nvml) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] and [c["check"] for c in report["checks"]] == [
        "probe", "device_request", "typed_match", "health", "stats"]  # fmt: skip
    match = next(c for c in report["checks"] if c["check"] == "typed_match")["detail"]
    assert match["glob"] == "A100*" and match["asked"]["matches"] == ["GPU-a"]


def test_without_nvml_the_check_fails_saying_why(capsys):
    assert gpu_probe.main([], nvml=NoNVML()) == 1
    report = json.loads(capsys.readouterr().out)
    assert not report["ok"] and "NVML did not initialise" in report["checks"][0]["detail"]


def test_the_glob_a_user_would_write_matches_the_card():
    assert gpu_probe.glob_for("NVIDIA H100 80GB HBM3") == "H100*"
    assert gpu_probe.glob_for("NVIDIA A100-SXM4-80GB") == "A100*"
    assert gpu_probe.glob_for("Tesla V100-SXM2-16GB") == "Tesla*"
