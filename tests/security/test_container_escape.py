"""Container escape: forbidden options are refused by the API, and a tampered Assignment handed straight to the
agent (its wire parser, spec builder and Docker runner) still yields a hardened container."""

from __future__ import annotations

import json
import subprocess
import uuid

import pytest

from jobs.validation import FORBIDDEN_OPTIONS
from nodeagent import containers, protocol
from nodeagent.docker_runner import DockerRunner

SOCKET = "/var/run/docker.sock"
# Realistic values for each way of asking Docker for more than the whitelist.
HOSTILE = {
    "privileged": True,
    "binds": [f"{SOCKET}:{SOCKET}", "/:/host"],
    "volumes": {"/": {"bind": "/host", "mode": "rw"}},
    "mounts": [{"Type": "bind", "Source": SOCKET, "Target": SOCKET}],
    "network_mode": "host",
    "network": "host",
    "pid_mode": "host",
    "ipc_mode": "host",
    "uts_mode": "host",
    "userns_mode": "host",
    "cgroupns": "host",
    "cap_add": ["ALL", "SYS_ADMIN", "NET_ADMIN"],
    "capabilities": ["SYS_ADMIN"],
    "devices": ["/dev/mem:/dev/mem:rwm", "/dev/kmsg"],
    "device_requests": [{"Driver": "nvidia", "Count": -1, "Capabilities": [["gpu"]]}],
    "security_opt": ["seccomp=unconfined", "apparmor=unconfined"],
    "user": "root",
    "runtime": "runc",
    "sysctls": {"kernel.core_pattern": "|/host/evil"},
    "tmpfs": {"/run": "exec"},
    "volumes_from": ["euler-web"],
    "extra_hosts": {"metadata": "100.100.100.200"},
    "cgroup_parent": "/",
    "ports": {"22/tcp": 22},
    "publish_all_ports": True,
    "group_add": ["docker"],
    "oom_kill_disable": True,
    "ulimits": [{"Name": "nofile", "Soft": 1 << 20, "Hard": 1 << 20}],
    "entrypoint": ["/bin/sh"],
    "working_dir": "/host",
    "host_config": {"Privileged": True, "Binds": [f"{SOCKET}:{SOCKET}"], "NetworkMode": "host"},
    "labels": {protocol.LABEL_NODE: "someone-else"},
    "dns": ["100.100.2.136"],
    "init": True,
    "shm_size": "64g",
    "pids_limit": -1,
}
WHITELIST = {
    "image",
    "command",
    "environment",
    "name",
    "labels",
    "nano_cpus",
    "mem_limit",
    "memswap_limit",
    "pids_limit",
    "cap_drop",
    "security_opt",
    "detach",
    "device_requests",
    "network_mode",
    "storage_opt",
    "init",  # set by the agent itself (Docker's init: signals reach the job)
    "log_config",  # set by the agent itself (the engine's log is bounded)
}


def test_every_forbidden_option_has_a_hostile_value_here():
    assert set(HOSTILE) >= FORBIDDEN_OPTIONS


@pytest.mark.django_db
@pytest.mark.parametrize("option", sorted(FORBIDDEN_OPTIONS))
def test_the_api_refuses_each_forbidden_option_with_a_realistic_value(api, option):
    body = {
        "name": "escape",
        "image": "euler-test/busybox",
        "command": ["sh"],
        "cpu_milli": 100,
        "memory_bytes": 64 << 20,
        option: HOSTILE[option],
    }
    r = api.post("/api/v1/jobs", body, format="json")
    assert r.status_code == 400, r.json()
    assert r.json()["code"] == "forbidden_option"
    from jobs.models import Job

    assert not Job.objects.exists()


def tampered(node_attempt: int) -> dict:
    return {
        "attempt_id": node_attempt,
        "job_id": 7,
        "attempt_number": 1,
        "image": "euler-test/busybox",
        "command": ["sh", "-c", f"grep CapEff /proc/self/status; id -u; ls {SOCKET} 2>&1; ls /host 2>&1; echo end"],
        "cpu_milli": 100,
        "memory_bytes": 32 << 20,
        "timeout_seconds": 30,
        **HOSTILE,
        "env": {"PATH": "/bin:/usr/bin"},
    }


def test_the_wire_parser_and_spec_builder_drop_every_smuggled_option():
    reply = protocol.PollReply.model_validate({"assignments": [tampered(1)]})
    kwargs = containers.create_kwargs(reply.assignments[0], node_name="n1")
    assert set(kwargs) <= WHITELIST
    assert "device_requests" not in kwargs  # GPUs only ever by the UUIDs the server placed
    assert kwargs["cap_drop"] == ["ALL"]
    assert kwargs["security_opt"] == ["no-new-privileges:true"]
    assert kwargs["pids_limit"] == containers.DEFAULT_PIDS_LIMIT
    assert kwargs["mem_limit"] == kwargs["memswap_limit"] == 32 << 20
    assert kwargs["labels"][protocol.LABEL_NODE] == "n1"
    # A raw dict (no protocol parse in between) is held to the same whitelist.
    assert containers.create_kwargs(tampered(1), node_name="n1") == kwargs


@pytest.mark.docker
def test_a_tampered_assignment_run_by_the_agents_runner_gets_a_hardened_container(docker_engine):
    runner = DockerRunner()
    node = f"esc-{uuid.uuid4().hex[:8]}"
    cid = runner.create_and_start(containers.create_kwargs(tampered(1), node_name=node))
    try:
        assert runner.wait(cid) == 0
        out = b"".join(data for _, data in runner.logs(cid)).decode()
        inspected = json.loads(subprocess.run(["docker", "inspect", cid], capture_output=True, check=True).stdout)[0]
    finally:
        runner.remove(cid)
    host, config = inspected["HostConfig"], inspected["Config"]
    assert host["Privileged"] is False
    assert not host.get("Binds") and not host.get("Mounts") and inspected["Mounts"] == []
    assert host["NetworkMode"] == "none"  # it asked for "host": anything but "default" gets no network
    assert host["PidMode"] == "" and host["IpcMode"] in {"private", "shareable"} and host["UTSMode"] == ""
    assert not host.get("CapAdd") and host["CapDrop"] == ["ALL"]
    assert not host.get("Devices") and not host.get("DeviceRequests")
    assert host["SecurityOpt"] == ["no-new-privileges:true"]
    assert host["PidsLimit"] == containers.DEFAULT_PIDS_LIMIT
    assert host["Memory"] == host["MemorySwap"] == 32 << 20
    assert not host.get("Sysctls") and not host.get("Tmpfs") and not host.get("PortBindings")
    assert not host.get("VolumesFrom") and not host.get("ExtraHosts") and not host.get("GroupAdd")
    assert (
        host.get("CgroupParent", "") == "" and not host.get("Dns") and host.get("Init") is True
    )  # ours, not the tampered one
    assert config["User"] == "" and config["WorkingDir"] in {"", "/"}
    assert config["Entrypoint"] in (None, [])
    assert config["Labels"][protocol.LABEL_NODE] == node
    # Seen from inside: no capabilities at all, no Docker socket, no host filesystem.
    assert "CapEff:\t0000000000000000" in out
    assert f"{SOCKET}: No such file or directory" in out and "/host: No such file or directory" in out
    assert out.rstrip().endswith("end")
