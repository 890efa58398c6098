"""What this host offers: CPUs and memory (psutil, cgroup limits respected), Docker, NVIDIA GPUs (NVML).

No NVML library (no driver, no GPU) means zero GPUs, logged once, not an error.
"""

from __future__ import annotations

import logging
import math
import shutil
import time
from pathlib import Path

import psutil

from nodeagent import protocol

log = logging.getLogger("euler.nodeagent.probe")

CGROUP_ROOT = Path("/sys/fs/cgroup")


# --- cgroups (pure parsers, then the readers) --------------------------------------------------
def parse_cpu_max(text: str) -> float | None:
    """cgroup v2 `cpu.max` ("max 100000" or "200000 100000") → CPUs, None when unlimited."""
    parts = text.split()
    if not parts or parts[0] == "max":
        return None
    try:
        quota = int(parts[0])
        period = int(parts[1]) if len(parts) > 1 else 100_000
    except ValueError:
        return None
    return quota / period if quota > 0 and period > 0 else None


def parse_memory_max(text: str) -> int | None:
    """cgroup `memory.max` / `memory.limit_in_bytes` → bytes, None when unlimited."""
    text = text.strip()
    if not text or text == "max":
        return None
    try:
        value = int(text)
    except ValueError:
        return None
    return value if 0 < value < (1 << 62) else None  # v1 writes a huge number for "no limit"


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def cgroup_cpus(root: Path = CGROUP_ROOT) -> float | None:
    text = _read(root / "cpu.max")
    if text is not None:
        return parse_cpu_max(text)
    quota, period = _read(root / "cpu" / "cpu.cfs_quota_us"), _read(root / "cpu" / "cpu.cfs_period_us")
    if quota and period:
        return parse_cpu_max(f"{quota.strip()} {period.strip()}") if quota.strip() != "-1" else None
    return None


def cgroup_memory(root: Path = CGROUP_ROOT) -> int | None:
    text = _read(root / "memory.max")
    if text is None:
        text = _read(root / "memory" / "memory.limit_in_bytes")
    return parse_memory_max(text) if text is not None else None


def cpu_milli(root: Path = CGROUP_ROOT) -> int:
    cpus = float(psutil.cpu_count(logical=True) or 1)
    limit = cgroup_cpus(root)
    if limit is not None:
        cpus = min(cpus, limit)
    return int(math.floor(cpus * 1000))


def memory_bytes(root: Path = CGROUP_ROOT) -> int:
    total = int(psutil.virtual_memory().total)
    limit = cgroup_memory(root)
    return min(total, limit) if limit is not None else total


# --- GPUs --------------------------------------------------------------------------------------
def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def gpus_from_nvml(nvml) -> list[protocol.GpuInfo]:
    """Every NVIDIA GPU through an initialised NVML module (pynvml or a fake with the same calls)."""
    gpus = []
    for index in range(nvml.nvmlDeviceGetCount()):
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        memory = nvml.nvmlDeviceGetMemoryInfo(handle)
        try:
            utilization = float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
        except nvml.NVMLError:
            utilization = 0.0
        gpus.append(
            protocol.GpuInfo(
                uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
                index=index,
                model=_text(nvml.nvmlDeviceGetName(handle))[:128],
                memory_bytes=int(memory.total),
                memory_used_bytes=int(memory.used),
                utilization=min(max(utilization, 0.0), 100.0),
            )
        )
    return gpus


class GpuProbe:
    """Initialises NVML once; without it (no library, no driver) reports zero GPUs and says so once."""

    def __init__(self, nvml=None) -> None:
        self.nvml = nvml
        self.available: bool | None = None

    def _init(self) -> bool:
        if self.available is not None:
            return self.available
        try:
            if self.nvml is None:
                import pynvml

                self.nvml = pynvml
            self.nvml.nvmlInit()
            self.available = True
        except Exception as exc:  # noqa: BLE001 - NVMLError_LibraryNotFound, driver mismatch, ImportError...
            log.info("no NVIDIA GPUs: NVML unavailable (%s)", type(exc).__name__)
            self.available = False
        return self.available

    def gpus(self) -> list[protocol.GpuInfo]:
        if not self._init():
            return []
        try:
            return gpus_from_nvml(self.nvml)
        except Exception as exc:  # noqa: BLE001 - a failing GPU must not stop heartbeats
            log.warning("NVML query failed: %s", exc)
            return []


# --- disk --------------------------------------------------------------------------------------
DISK_QUANTUM = 1 << 28  # free space is reported in 256 MiB steps so that every write does not move the offer


def free_disk_bytes(path: Path | str | None) -> int | None:
    """Free space of the file system holding `path` (Docker's data root), None when it cannot be read here
    (an agent in a container without the data root mounted)."""
    if not path:
        return None
    try:
        free = shutil.disk_usage(path).free
    except OSError:
        return None
    return free - free % DISK_QUANTUM


# --- Docker ------------------------------------------------------------------------------------
def docker_facts(timeout: float = 5, *, patience: float = 60) -> tuple[str | None, str | None]:
    """The engine's version and data root, or (None, None) when no Docker engine answers. An engine that is
    there but slow (a busy host: the call times out rather than being refused) is asked again, with a longer
    deadline each time, for up to `patience` seconds: the agent decides once at start whether it runs jobs, and
    a busy engine must not make it a node that never runs one."""
    deadline = time.monotonic() + patience
    while True:
        try:
            import docker

            client = docker.from_env(timeout=timeout)
            try:
                version = str(client.version().get("Version", ""))[:64]
                root = str(client.info().get("DockerRootDir") or "") or None
                return version, root
            finally:
                client.close()
        except Exception as exc:  # noqa: BLE001 - any failure means no usable engine
            if not _timed_out(exc) or time.monotonic() + timeout > deadline:
                return None, None
            log.warning("the Docker engine did not answer within %gs; asking again", timeout)
            timeout = min(timeout * 2, 30)


def _timed_out(exc: BaseException) -> bool:
    """Whether a failed engine call timed out (a slow engine) rather than being refused (no engine)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, TimeoutError) or "timed out" in str(seen).lower():
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def docker_version(timeout: float = 5) -> str | None:
    """The engine's version, or None when no Docker engine answers."""
    return docker_facts(timeout)[0]


class Probe:
    def __init__(self, *, gpu_probe: GpuProbe | None = None, cgroup_root: Path = CGROUP_ROOT) -> None:
        self.gpu_probe = gpu_probe or GpuProbe()
        self.cgroup_root = cgroup_root
        self.docker, self.docker_root = docker_facts()
        self._disk_warned = False

    def disk_bytes(self) -> int | None:
        free = free_disk_bytes(self.docker_root)
        if free is None and self.docker and not self._disk_warned:
            log.warning(
                "cannot read free space of Docker's data root %s: disk is not reported unless "
                "EULER_NODE_MAX_DISK_BYTES is set (or mount the data root into the agent, read-only)",
                self.docker_root,
            )
            self._disk_warned = True
        return free

    def resources(self) -> protocol.Resources:
        return protocol.Resources(
            cpu_milli=cpu_milli(self.cgroup_root),
            memory_bytes=memory_bytes(self.cgroup_root),
            gpus=self.gpu_probe.gpus(),
            docker_version=self.docker or "",
            disk_bytes=self.disk_bytes(),
        )
