"""The lender's caps and network policy, read from the environment and applied to what the machine has (pure)."""

import pytest

from nodeagent import protocol
from nodeagent.config import ConfigError, load
from nodeagent.offer import Caps, NetworkPolicy, apply_caps, load_caps, load_network_policy

GIB = 1 << 30


def _machine(**over):
    gpus = [protocol.GpuInfo(uuid=f"GPU-{i}aaa", index=i, model="A100", memory_bytes=80 * GIB) for i in range(4)]
    return protocol.Resources(
        cpu_milli=16000, memory_bytes=64 * GIB, disk_bytes=500 * GIB, gpus=gpus, docker_version="20.10"
    ).model_copy(update=over)


def test_an_uncapped_node_offers_the_whole_machine():
    res = apply_caps(_machine(), Caps())
    assert (res.cpu_milli, res.memory_bytes, res.disk_bytes, len(res.gpus)) == (16000, 64 * GIB, 500 * GIB, 4)
    assert res.capped == []


def test_a_capped_node_offers_its_caps_and_says_what_was_capped():
    caps = load_caps(
        {
            "EULER_NODE_MAX_CPU_MILLI": "4000",
            "EULER_NODE_MAX_MEMORY_BYTES": str(8 * GIB),
            "EULER_NODE_MAX_DISK_BYTES": str(20 * GIB),
            "EULER_NODE_GPUS": "1, GPU-3aaa",
        }
    )
    res = apply_caps(_machine(), caps)
    assert (res.cpu_milli, res.memory_bytes, res.disk_bytes) == (4000, 8 * GIB, 20 * GIB)
    assert [g.uuid for g in res.gpus] == ["GPU-1aaa", "GPU-3aaa"]
    assert res.capped == ["cpu", "memory", "disk", "gpus"]


def test_a_cap_above_the_machine_offers_the_machine():
    res = apply_caps(_machine(), Caps(cpu_milli=64000, memory_bytes=1 << 50, disk_bytes=1 << 50))
    assert (res.cpu_milli, res.memory_bytes, res.disk_bytes) == (16000, 64 * GIB, 500 * GIB) and res.capped == []


def test_gpus_none_offers_no_gpu_and_unset_offers_all():
    assert apply_caps(_machine(), load_caps({"EULER_NODE_GPUS": "none"})).gpus == []
    assert len(apply_caps(_machine(), load_caps({"EULER_NODE_GPUS": ""})).gpus) == 4


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("EULER_NODE_MAX_CPU_MILLI", "2 cores", "EULER_NODE_MAX_CPU_MILLI must be a whole number"),
        ("EULER_NODE_MAX_MEMORY_BYTES", "0", "EULER_NODE_MAX_MEMORY_BYTES must be at least 1"),
        ("EULER_NODE_MAX_DISK_BYTES", "-5", "EULER_NODE_MAX_DISK_BYTES must be at least 0"),
        ("EULER_NODE_GPUS", "0,gpu one", "EULER_NODE_GPUS: 'gpu one'"),
        ("EULER_NODE_JOB_EGRESS", "open", "EULER_NODE_JOB_EGRESS is one of public, none, unrestricted"),
        ("EULER_NODE_JOB_ALLOWED_NETWORKS", "10.0.0.0/8,lan", "EULER_NODE_JOB_ALLOWED_NETWORKS: 'lan'"),
    ],
)
def test_a_bad_lender_setting_stops_the_agent_naming_the_variable(name, value, message):
    env = {"EULER_CONTROL_PLANE_URL": "https://e.example.com", "EULER_NODE_NAME": "n1", name: value}
    with pytest.raises(ConfigError, match=message):
        load(env)


def test_the_network_policy_defaults_to_public_and_normalises_allowed_cidrs():
    assert load_network_policy({}) == NetworkPolicy(egress="public", allowed=())
    policy = load_network_policy(
        {"EULER_NODE_JOB_EGRESS": "None", "EULER_NODE_JOB_ALLOWED_NETWORKS": "10.8.1.7/16, fd12::/64,10.8.0.0/16"}
    )
    assert policy == NetworkPolicy(egress="none", allowed=("10.8.0.0/16", "fd12::/64"))
