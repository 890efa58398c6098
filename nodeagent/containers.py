"""Pure container spec builder: an Assignment becomes docker-py `containers.create` kwargs, from a whitelist.

Whatever the server sends, only these options ever reach Docker: no privileged mode, host namespaces,
binds, volumes, devices or extra capabilities can be expressed here.
"""

from __future__ import annotations

from typing import Any

from docker.types import DeviceRequest, LogConfig, Mount

from nodeagent import protocol

DEFAULT_PIDS_LIMIT = 512
DEFAULT_CONTAINER_LOG_BYTES = 64 * 1024 * 1024
MIN_CONTAINER_LOG_BYTES = 1024 * 1024
CONTAINER_LOG_FILES = 4
# json-file rotates once a file reached max-size, so a file overshoots by at most one entry: a 16 KiB piece
# of output, JSON-escaped (6 bytes per control byte), with its envelope.
CONTAINER_LOG_ENTRY_BYTES = 128 * 1024
MAX_PIDS_LIMIT = 65_536
MIN_MEMORY_BYTES = 4 * 1024 * 1024
# gVisor's sandbox (runsc on its default ptrace platform) runs in the container's pids cgroup: its own threads and
# one stub process per job thread count there, about 8 host tasks per job process (measured: a 512 limit holds
# ~64 sandboxed processes). Under a sandbox the cgroup limit is this many times the job's, so that the job keeps
# its allowance; the host stays bounded all the same. Below ~32 the sandbox itself cannot start.
SANDBOX_PIDS_FACTOR = 8


def container_name(*, node_name: str, attempt_id: int, owner: str = "") -> str:
    return f"euler-{node_name}-{owner}-a{attempt_id}" if owner else f"euler-{node_name}-a{attempt_id}"


def labels_for(*, node_name: str, job_id: int, attempt_id: int, owner: str = "") -> dict[str, str]:
    labels = {
        protocol.LABEL_MANAGED: "true",
        protocol.LABEL_JOB: str(job_id),
        protocol.LABEL_ATTEMPT: str(attempt_id),
        protocol.LABEL_NODE: node_name,
    }
    if owner:
        labels[protocol.LABEL_OWNER] = owner
    return labels


def container_log_config(max_bytes: int) -> LogConfig:
    """The engine's copy of a job's log, bounded on disk at `max_bytes` whatever the job writes.

    json-file, rotated over CONTAINER_LOG_FILES files: `docker logs` (the agent's reader and its replay after a
    restart) reads across them, and rotation drops the oldest quarter at a time, so the newest ≥ 3/4 is kept.
    """
    max_bytes = max(int(max_bytes), MIN_CONTAINER_LOG_BYTES)
    per_file = max_bytes // CONTAINER_LOG_FILES - CONTAINER_LOG_ENTRY_BYTES
    return LogConfig(type="json-file", config={"max-size": str(per_file), "max-file": str(CONTAINER_LOG_FILES)})


def environment(a: protocol.Assignment) -> dict[str, str]:
    """The job's env (platform nodes only), and on every node an array task's index and count, which win over a
    job env of the same name."""
    env = {str(k): str(v) for k, v in a.env.items()}
    if a.array_index is not None and a.array_count is not None:
        env["EULER_ARRAY_INDEX"] = str(a.array_index)
        env["EULER_ARRAY_COUNT"] = str(a.array_count)
    return env


def create_kwargs(
    assignment: protocol.Assignment | dict,
    *,
    node_name: str,
    owner: str = "",
    log_max_bytes: int = DEFAULT_CONTAINER_LOG_BYTES,
    network: str | None = None,
    disk_quota: bool = False,
    memory_volumes: tuple[str, ...] = (),
    runtime: str = "",
    sandbox: bool = False,
) -> dict[str, Any]:
    """The exact kwargs for `client.containers.create(**kwargs)`; unknown input fields are ignored.

    `network`: the agent's own bridge for jobs on the node's egress policy; a job asking for anything but
    "default", or an agent without a usable bridge, gets no network at all. `disk_quota`: the storage driver
    enforces `storage_opt size`, so the job's `disk_bytes` is also a hard quota on its writable layer.
    `memory_volumes`: the image's VOLUME paths, where the agent cannot measure volumes on disk: each becomes a
    tmpfs (no bytes on the lender's disk; what the job writes there counts against its memory limit).
    `runtime`: the engine runtime the agent chose and checked (nodeagent/runtimes.py; "": the engine's default);
    `sandbox`: it is gVisor's, whose own tasks share the job's pids limit (SANDBOX_PIDS_FACTOR), and which needs no
    init for signals to reach the job.
    """
    a = assignment if isinstance(assignment, protocol.Assignment) else protocol.Assignment.model_validate(assignment)
    pids = a.pids_limit if 0 < a.pids_limit <= MAX_PIDS_LIMIT else DEFAULT_PIDS_LIMIT
    memory = max(int(a.memory_bytes), MIN_MEMORY_BYTES)
    if sandbox:
        pids *= SANDBOX_PIDS_FACTOR
    kwargs: dict[str, Any] = {
        "image": a.image,
        "command": list(a.command),
        "environment": environment(a),
        "name": container_name(node_name=node_name, attempt_id=a.attempt_id, owner=owner),
        "labels": labels_for(node_name=node_name, job_id=a.job_id, attempt_id=a.attempt_id, owner=owner),
        "nano_cpus": max(int(a.cpu_milli), 1) * 1_000_000,
        "mem_limit": memory,
        "memswap_limit": memory,
        "pids_limit": pids,
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges:true"],
        # Docker's init as PID 1 forwards SIGTERM: a job that does not trap it still ends on cancel. Not under gVisor:
        # its kernel gives PID 1 no such shield (a `sleep` there ends on SIGTERM, exit 143), and an init's own exit
        # in the sandbox delayed every job's end by ~10 ms (BENCHMARKS.md, "The last hops around the engine").
        "init": not sandbox,
        "log_config": container_log_config(log_max_bytes),
        "detach": True,
    }
    if runtime:
        kwargs["runtime"] = runtime
    if a.gpu_uuids:
        kwargs["device_requests"] = [DeviceRequest(device_ids=list(a.gpu_uuids), capabilities=[["gpu"]])]
    kwargs["network_mode"] = network if a.network == "default" and network else "none"
    if disk_quota and a.disk_bytes > 0:
        kwargs["storage_opt"] = {"size": str(a.disk_bytes)}
    if memory_volumes:
        size = a.disk_bytes if a.disk_bytes > 0 else memory
        kwargs["mounts"] = [Mount(target=path, source=None, type="tmpfs", tmpfs_size=size) for path in memory_volumes]
    return kwargs


def probe_kwargs(image: str, network: str, *, sandbox: bool, label: dict[str, str]) -> tuple[dict, dict[str, Any]]:
    """A runtime probe (nodeagent/runtimes.py): (`api.create_host_config` kwargs, `api.create_container` kwargs
    but the host config) for `true`, hardened as a job is, on `network` ("none" or the engine's "bridge")."""
    host = {
        "network_mode": network,
        "mem_limit": 128 * 1024 * 1024,
        "memswap_limit": 128 * 1024 * 1024,
        "nano_cpus": 500_000_000,
        "pids_limit": 64 * (SANDBOX_PIDS_FACTOR if sandbox else 1),
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges:true"],
        "init": True,
    }
    return host, {"image": image, "command": ["true"], "labels": dict(label)}
