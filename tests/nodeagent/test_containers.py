"""The container spec builder turns an assignment into exactly the whitelisted docker-py kwargs."""

from __future__ import annotations

from docker.types import DeviceRequest

from nodeagent import containers, protocol


def assignment(**over) -> dict:
    base = {
        "attempt_id": 7,
        "job_id": 3,
        "attempt_number": 1,
        "image": "euler-test/busybox",
        "command": ["sh", "-c", "echo hello from Euler"],
        "env": {"GREETING": "hi"},
        "cpu_milli": 500,
        "memory_bytes": 64 * 1024 * 1024,
        "timeout_seconds": 60,
    }
    return base | over


def test_it_builds_exactly_the_whitelisted_kwargs():
    kwargs = containers.create_kwargs(assignment(), node_name="n1")
    assert kwargs == {
        "image": "euler-test/busybox",
        "command": ["sh", "-c", "echo hello from Euler"],
        "environment": {"GREETING": "hi"},
        "name": "euler-n1-a7",
        "labels": {"euler.managed": "true", "euler.job": "3", "euler.attempt": "7", "euler.node": "n1"},
        "nano_cpus": 500_000_000,
        "mem_limit": 64 * 1024 * 1024,
        "memswap_limit": 64 * 1024 * 1024,
        "pids_limit": 512,
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges:true"],
        "init": True,
        "log_config": {
            "Type": "json-file",
            "Config": {"max-size": str(16 * 1024 * 1024 - 128 * 1024), "max-file": "4"},
        },
        "detach": True,
        "network_mode": "none",
    }


def test_a_sandboxed_job_has_no_init_and_a_pids_limit_scaled_for_the_sandbox():
    kwargs = containers.create_kwargs(assignment(), node_name="n1", runtime="runsc", sandbox=True)
    plain = containers.create_kwargs(assignment(), node_name="n1")
    assert kwargs["init"] is False and plain["init"] is True  # gVisor's PID 1 gets SIGTERM without one
    assert kwargs["pids_limit"] == plain["pids_limit"] * containers.SANDBOX_PIDS_FACTOR
    assert kwargs["runtime"] == "runsc"


def test_it_passes_gpus_by_uuid_as_a_device_request():
    kwargs = containers.create_kwargs(assignment(gpu_uuids=["GPU-aaa", "GPU-bbb"]), node_name="n1")
    assert kwargs["device_requests"] == [DeviceRequest(device_ids=["GPU-aaa", "GPU-bbb"], capabilities=[["gpu"]])]
    assert dict(kwargs["device_requests"][0]) == {
        "Driver": "",
        "Count": 0,
        "DeviceIDs": ["GPU-aaa", "GPU-bbb"],
        "Capabilities": [["gpu"]],
        "Options": {},
    }


def test_it_ignores_every_option_outside_the_whitelist():
    hostile = assignment(
        privileged=True,
        volumes={"/": {"bind": "/host"}},
        binds=["/var/run/docker.sock:/var/run/docker.sock"],
        mounts=["/etc"],
        network_mode="host",
        pid_mode="host",
        ipc_mode="host",
        cap_add=["SYS_ADMIN"],
        devices=["/dev/sda"],
        security_opt=["seccomp=unconfined"],
        user="root",
        runtime="runc",
    )
    kwargs = containers.create_kwargs(hostile, node_name="n1")
    assert kwargs == containers.create_kwargs(assignment(), node_name="n1")


def test_it_accepts_a_protocol_assignment_and_keeps_a_custom_pids_limit():
    a = protocol.Assignment.model_validate(assignment(pids_limit=64, env={}))
    kwargs = containers.create_kwargs(a, node_name="n1")
    assert kwargs["pids_limit"] == 64
    assert kwargs["environment"] == {}
    assert "device_requests" not in kwargs


def test_it_falls_back_to_the_default_pids_limit_when_the_value_is_out_of_range():
    assert containers.create_kwargs(assignment(pids_limit=0), node_name="n1")["pids_limit"] == 512
    assert containers.create_kwargs(assignment(pids_limit=10**9), node_name="n1")["pids_limit"] == 512


def test_it_never_goes_below_the_minimum_memory_or_one_milli_cpu():
    kwargs = containers.create_kwargs(assignment(memory_bytes=1, cpu_milli=0), node_name="n1")
    assert kwargs["mem_limit"] == kwargs["memswap_limit"] == 4 * 1024 * 1024
    assert kwargs["nano_cpus"] == 1_000_000


def test_a_default_network_job_joins_the_agents_bridge_and_anything_else_gets_no_network():
    assert (
        containers.create_kwargs(assignment(), node_name="n1", network="euler-n1-ab")["network_mode"] == "euler-n1-ab"
    )
    none = assignment(network="none")
    assert containers.create_kwargs(none, node_name="n1", network="euler-n1-ab")["network_mode"] == "none"
    host = assignment(network="host")
    assert containers.create_kwargs(host, node_name="n1", network="euler-n1-ab")["network_mode"] == "none"
    assert containers.create_kwargs(assignment(), node_name="n1", network=None)["network_mode"] == "none"


def test_disk_bytes_becomes_a_storage_quota_only_where_the_driver_enforces_one():
    a = assignment(disk_bytes=1 << 30)
    assert "storage_opt" not in containers.create_kwargs(a, node_name="n1")
    assert containers.create_kwargs(a, node_name="n1", disk_quota=True)["storage_opt"] == {"size": str(1 << 30)}


def test_image_volumes_the_agent_cannot_measure_become_tmpfs_of_the_disk_limit():
    a = assignment(disk_bytes=1 << 30)
    assert "mounts" not in containers.create_kwargs(a, node_name="n1")
    mounts = containers.create_kwargs(a, node_name="n1", memory_volumes=("/data", "/var/lib/x"))["mounts"]
    assert [dict(m) for m in mounts] == [
        {"Target": path, "Source": None, "Type": "tmpfs", "ReadOnly": False, "TmpfsOptions": {"SizeBytes": 1 << 30}}
        for path in ("/data", "/var/lib/x")
    ]


def test_the_engine_log_is_bounded_by_its_files_each_with_room_for_one_overshooting_entry():
    config = containers.container_log_config(1024 * 1024)["Config"]
    files, size = int(config["max-file"]), int(config["max-size"])
    assert files * (size + containers.CONTAINER_LOG_ENTRY_BYTES) <= 1024 * 1024
    assert containers.container_log_config(1)["Config"] == config  # never below the minimum


def test_an_array_task_gets_its_index_and_count_on_every_node_and_they_win_over_job_env():
    task = assignment(env={"EULER_ARRAY_INDEX": "spoofed", "A": "1"}, array_index=7, array_count=100)
    env = containers.create_kwargs(task, node_name="n1")["environment"]
    assert env == {"A": "1", "EULER_ARRAY_INDEX": "7", "EULER_ARRAY_COUNT": "100"}
    community = assignment(env={}, array_index=0, array_count=1, node_trust="community")
    assert containers.create_kwargs(community, node_name="n1")["environment"] == {
        "EULER_ARRAY_INDEX": "0",
        "EULER_ARRAY_COUNT": "1",
    }
    assert "EULER_ARRAY_INDEX" not in containers.create_kwargs(assignment(), node_name="n1")["environment"]
