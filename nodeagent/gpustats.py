"""Per-job GPU figures: each running attempt's GPUs sampled through NVML, summed up in its `ended` report.

Per GPU: utilisation (NVML's percent of time a kernel ran, over its last sample period), averaged and at its
peak, and peak memory. Memory is the job's processes' own when NVML lists them with their usage
(nvmlDeviceGetComputeRunningProcesses, summed: the GPU is the job's alone, so every process on it is the job's,
or one of the lender's own), else the whole GPU's used memory; `memory_source` says which the peak came from.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from nodeagent import protocol

log = logging.getLogger("euler.nodeagent.gpustats")

SAMPLE_SECONDS = 2.0


@dataclass
class Figures:
    """One GPU's samples over an attempt (pure: add() and stat())."""

    uuid: str
    samples: int = 0
    utilization_sum: float = 0.0
    utilization_max: float = 0.0
    memory_peak: int = 0
    peak_per_process: bool = False  # the peak came from the processes' own figures (else the device's)

    def add(self, utilization: float, memory: int, *, per_process: bool) -> None:
        utilization = min(max(float(utilization), 0.0), 100.0)
        self.samples += 1
        self.utilization_sum += utilization
        self.utilization_max = max(self.utilization_max, utilization)
        if memory > self.memory_peak or self.samples == 1:
            self.memory_peak, self.peak_per_process = max(int(memory), 0), per_process

    def stat(self) -> protocol.GpuStat:
        return protocol.GpuStat(
            uuid=self.uuid,
            samples=self.samples,
            utilization_avg=round(self.utilization_sum / self.samples, 1) if self.samples else 0.0,
            utilization_max=self.utilization_max,
            memory_peak_bytes=self.memory_peak,
            memory_source="process" if self.peak_per_process else "device",
        )


def process_memory(nvml, handle) -> int | None:
    """The memory the compute processes on this GPU use, or None when NVML does not say (containers, MIG, old
    drivers give no usage per process)."""
    try:
        procs = nvml.nvmlDeviceGetComputeRunningProcesses(handle)
    except nvml.NVMLError:
        return None
    used = [getattr(p, "usedGpuMemory", None) for p in procs]
    if not used or any(u is None for u in used):
        return None
    return sum(int(u) for u in used)


class GpuStats:
    """The attempts being sampled (attempt id -> its GPUs' Figures); sample() reads each GPU once."""

    def __init__(self, nvml) -> None:
        self.nvml = nvml
        self._lock = threading.Lock()
        self._watched: dict[int, dict[str, Figures]] = {}
        self._handles: dict[str, object] = {}

    def start(self, attempt_id: int, uuids: list[str]) -> None:
        if not uuids:
            return
        with self._lock:
            self._watched.setdefault(attempt_id, {u: Figures(u) for u in uuids})
        self.sample([attempt_id])  # a job shorter than one period still gets a figure

    def finish(self, attempt_id: int) -> list[protocol.GpuStat]:
        """The attempt's figures (one last sample first); [] when it was not sampled."""
        self.sample([attempt_id])
        with self._lock:
            figures = self._watched.pop(attempt_id, {})
        return [f.stat() for f in figures.values()]

    def forget(self, attempt_id: int) -> None:
        with self._lock:
            self._watched.pop(attempt_id, None)

    def _handle(self, uuid: str):
        handle = self._handles.get(uuid)
        if handle is None:
            handle = self._handles[uuid] = self.nvml.nvmlDeviceGetHandleByUUID(uuid.encode())
        return handle

    def sample(self, attempt_ids: list[int] | None = None) -> None:
        nvml = self.nvml
        with self._lock:
            watched = [(a, dict(f)) for a, f in self._watched.items() if attempt_ids is None or a in attempt_ids]
        for _, figures in watched:
            for uuid, fig in figures.items():
                try:
                    handle = self._handle(uuid)
                    utilization = float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
                    own = process_memory(nvml, handle)
                    memory = own if own is not None else int(nvml.nvmlDeviceGetMemoryInfo(handle).used)
                except nvml.NVMLError as exc:
                    log.debug("GPU %s: no sample (%s)", uuid, exc)
                    continue
                with self._lock:
                    fig.add(utilization, memory, per_process=own is not None)
