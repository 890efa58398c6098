"""A fake NVML (the one fake the project allows: the boundary to NVIDIA's driver), with pynvml's names.

Cards are dicts: uuid, name, total, used, util (None: not supported), and optionally ecc (volatile uncorrected
count; None: no ECC on the card), procs (a list of per-process used bytes; None in an entry: not available;
the key absent: the call is not supported), lost (NVML lost the GPU). `xid(uuid, code)` queues an XID event.
"""

from __future__ import annotations

import queue
from types import SimpleNamespace

NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_GPU_IS_LOST = 15


class FakeNVML:
    class NVMLError(Exception):
        def __init__(self, value: int = NVML_ERROR_NOT_SUPPORTED, text: str = ""):
            super().__init__(text or f"NVML error {value}")
            self.value = value

    nvmlEventTypeXidCriticalError = 0x8

    def __init__(self, cards):
        self.cards = cards
        self.inited = 0
        self.events: queue.Queue = queue.Queue()
        self.registered: list[tuple[str, int]] = []

    def _card(self, h):
        if h.get("lost"):
            raise self.NVMLError(NVML_ERROR_GPU_IS_LOST, "GPU is lost")
        return h

    # --- what the probe reads ---------------------------------------------------------------------
    def nvmlInit(self):
        self.inited += 1

    def nvmlDeviceGetCount(self):
        return len(self.cards)

    def nvmlDeviceGetHandleByIndex(self, i):
        return self.cards[i]

    def nvmlDeviceGetHandleByUUID(self, uuid):
        uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
        for card in self.cards:
            if card["uuid"] == uuid:
                return card
        raise self.NVMLError(13, "not found")

    def nvmlDeviceGetUUID(self, h):
        return h["uuid"].encode()

    def nvmlDeviceGetName(self, h):
        return h["name"]

    def nvmlDeviceGetMemoryInfo(self, h):
        h = self._card(h)
        return SimpleNamespace(total=h["total"], used=h["used"], free=h["total"] - h["used"])

    def nvmlDeviceGetUtilizationRates(self, h):
        h = self._card(h)
        if h.get("util") is None:
            raise self.NVMLError(NVML_ERROR_NOT_SUPPORTED, "not supported")
        return SimpleNamespace(gpu=h["util"], memory=0)

    # --- health: ECC counters and XID events ------------------------------------------------------
    def nvmlDeviceGetTotalEccErrors(self, h, error_type, counter_type):
        h = self._card(h)
        assert (error_type, counter_type) == (1, 0)  # uncorrected, volatile
        if h.get("ecc") is None:
            raise self.NVMLError(NVML_ERROR_NOT_SUPPORTED, "no ECC")
        return h["ecc"]

    def nvmlEventSetCreate(self):
        return "event-set"

    def nvmlDeviceRegisterEvents(self, h, types, event_set):
        self.registered.append((h["uuid"], types))

    def nvmlEventSetWait(self, event_set, timeout_ms):
        try:
            return self.events.get(timeout=timeout_ms / 1000)
        except queue.Empty:
            raise self.NVMLError(NVML_ERROR_TIMEOUT, "timeout") from None

    def xid(self, uuid: str, code: int) -> None:
        device = self.nvmlDeviceGetHandleByUUID(uuid)
        self.events.put(SimpleNamespace(device=device, eventType=self.nvmlEventTypeXidCriticalError, eventData=code))

    # --- per-process figures ----------------------------------------------------------------------
    def nvmlDeviceGetComputeRunningProcesses(self, h):
        h = self._card(h)
        if "procs" not in h:
            raise self.NVMLError(NVML_ERROR_NOT_SUPPORTED, "not supported")
        return [SimpleNamespace(pid=100 + i, usedGpuMemory=used) for i, used in enumerate(h["procs"])]


class NoNVML:
    def nvmlInit(self):
        raise OSError("libnvidia-ml.so.1: cannot open shared object file")
