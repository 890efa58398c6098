"""The agent's GPU thread: waits on NVML's XID events, reads the ECC counters now and then, samples running jobs.

Started by the daemon when NVML answers (no NVIDIA GPU: no thread). A GPU turning unhealthy stops the
attempts that hold it (Executor.gpu_unhealthy): they end `gpu_error`, which the server counts as `lost`.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from nodeagent.gpuhealth import GpuHealth
from nodeagent.gpustats import SAMPLE_SECONDS, GpuStats

log = logging.getLogger("euler.nodeagent.gpuwatch")

CHECK_SECONDS = 10.0  # ECC counters and lost GPUs
EVENT_WAIT_MS = 500


class GpuWatch:
    def __init__(self, nvml, *, state_dir: Path | None = None, executor=None) -> None:
        self.executor = executor
        state_file = Path(state_dir) / "gpu-health.json" if state_dir is not None else None
        self.health = GpuHealth(nvml, self._unhealthy, state_file=state_file)
        self.stats = GpuStats(nvml)
        self.thread: threading.Thread | None = None

    def _unhealthy(self, uuid: str, reason: str) -> None:
        executor = self.executor
        if executor is not None and hasattr(executor, "gpu_unhealthy"):
            executor.gpu_unhealthy(uuid, reason, self.health.index.get(uuid))

    def start(self, stop: threading.Event) -> GpuWatch:
        self.health.open()
        self.health.check()
        self.thread = threading.Thread(target=self.loop, args=(stop,), name="gpus", daemon=True)
        self.thread.start()
        return self

    def loop(self, stop: threading.Event) -> None:
        next_sample = next_check = time.monotonic()
        while not stop.is_set():
            try:
                self.health.wait_events(EVENT_WAIT_MS)
                now = time.monotonic()
                if now >= next_sample:
                    next_sample = now + SAMPLE_SECONDS
                    self.stats.sample()
                if now >= next_check:
                    next_check = now + CHECK_SECONDS
                    self.health.check()
            except Exception:  # noqa: BLE001 - a failing GPU query must not end the watch
                log.exception("GPU watch failed; going on")
                stop.wait(1.0)


def start(probe, executor, *, state_dir: Path, stop: threading.Event) -> GpuWatch | None:
    """The GPU watch of the probe's NVML, attached to the executor; None when this host has no NVML."""
    gpu_probe = getattr(probe, "gpu_probe", None)
    if gpu_probe is None or not gpu_probe._init():
        return None
    watch = GpuWatch(gpu_probe.nvml, state_dir=state_dir, executor=executor)
    if hasattr(executor, "gpu_watch"):
        executor.gpu_watch = watch
    try:
        return watch.start(stop)
    except Exception as exc:  # noqa: BLE001 - GPUs without health watching still run jobs
        log.warning("GPU health watch not started: %s", exc)
        return None
