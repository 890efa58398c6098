"""GPU health end to end: the daemon (fake NVML) reports an XID, the server stores it and stops placing on the
GPU, the operator resets it, the agent clears it, or marks it again while the fault is still there."""

import pytest

from nodeagent import daemon as daemon_mod
from nodeagent.config import AgentConfig
from nodeagent.gpuwatch import GpuWatch
from nodeagent.probe import GpuProbe, Probe

from .fakenvml import FakeNVML
from .test_agent_daemon import RecordingExecutor

pytestmark = pytest.mark.django_db(transaction=True)

GIB = 1 << 30


@pytest.fixture
def token(make_user):
    from nodes.services import enrollment_token_create

    return enrollment_token_create(trust="platform", by=make_user("ops", staff=True))[1]


@pytest.fixture
def nvml():
    return FakeNVML([
        {"uuid": "GPU-0", "name": "NVIDIA A100-SXM4-80GB", "total": 80 * GIB, "used": 0, "util": 0, "ecc": 0},
        {"uuid": "GPU-1", "name": "NVIDIA A100-SXM4-80GB", "total": 80 * GIB, "used": 0, "util": 0, "ecc": 0},
    ])  # fmt: skip


def daemon(live_server, tmp_path, token, nvml):
    config = AgentConfig(url=live_server.url, name="gpu-box", state_dir=tmp_path / "st", enrollment_token=token)
    probe = Probe(gpu_probe=GpuProbe(nvml), cgroup_root=tmp_path)
    d = daemon_mod.Daemon(config, probe=probe, executor=RecordingExecutor())
    d.enroll()
    d.gpus = GpuWatch(nvml, state_dir=tmp_path / "st")
    d.gpus.health.open()
    return d


def gpus_of(name="gpu-box"):
    from nodes.models import Node

    return {g["uuid"]: (g["healthy"], g["health_reason"]) for g in Node.objects.get(name=name).gpus}


def test_an_xid_is_reported_stored_and_kept_off_the_scheduler_until_reset(live_server, tmp_path, token, nvml):
    from jobs.scheduling.loading import node_rows
    from nodes.gpuhealth import node_gpu_reset
    from nodes.models import Node, NodeEvent

    d = daemon(live_server, tmp_path, token, nvml)
    d.heartbeat_once()
    assert gpus_of() == {"GPU-0": (True, ""), "GPU-1": (True, "")}
    nvml.xid("GPU-1", 79)
    d.gpus.health.wait_events(1000)
    d.heartbeat_once()
    assert gpus_of()["GPU-1"] == (False, "XID 79")
    node = Node.objects.get(name="gpu-box")
    event = NodeEvent.objects.filter(node=node, kind="gpu_unhealthy").get()
    assert "GPU 1 (GPU-1) unhealthy: XID 79" in event.message
    (snap,) = node_rows()[0]
    assert snap.gpu_uuids == ("GPU-0",)  # the scheduler sees only the healthy one

    assert node_gpu_reset(node=node, uuid="GPU-1") == ["GPU-1"]
    reply = d.heartbeat_once()  # the reply carries the reset; the agent clears its mark
    assert reply.gpu_resets == {"GPU-1": 1} and d.gpus.health.reason("GPU-1") is None
    d.heartbeat_once()
    assert gpus_of()["GPU-1"] == (True, "")
    assert NodeEvent.objects.filter(node=node, kind="gpu_healthy").exists()
    assert len(node_rows()[0][0].gpu_uuids) == 2
    d.heartbeat_once()  # the same reset number again: nothing more happens
    assert d.gpus.health.resets == {"GPU-1": 1}


def test_a_reset_while_the_fault_is_still_there_marks_the_gpu_again(live_server, tmp_path, token, nvml):
    from euler.errors import Conflict, InvalidInput
    from nodes.gpuhealth import node_gpu_reset
    from nodes.models import Node

    nvml.cards[0]["ecc"] = 4
    d = daemon(live_server, tmp_path, token, nvml)
    d.gpus.health.check()
    d.heartbeat_once()
    assert gpus_of()["GPU-0"] == (False, "4 uncorrected ECC errors (volatile)")
    node = Node.objects.get(name="gpu-box")
    with pytest.raises(Conflict):
        node_gpu_reset(node=node, uuid="GPU-1")  # healthy: nothing to reset
    with pytest.raises(InvalidInput):
        node_gpu_reset(node=node, uuid="GPU-9")
    node_gpu_reset(node=node)  # every unhealthy GPU
    d.heartbeat_once()
    d.heartbeat_once()
    assert gpus_of()["GPU-0"] == (False, "4 uncorrected ECC errors (volatile)")  # marked again at once
