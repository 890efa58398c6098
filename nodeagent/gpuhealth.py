"""GPU health on this node: NVML's XID events and ECC counters mark a GPU unhealthy; an operator's reset clears it.

A mark lives in the agent's memory and travels in every heartbeat (`GpuInfo.healthy`, `health_reason`): the server
places nothing on an unhealthy GPU, and an attempt running on it is stopped and ends `gpu_error`. The operator's
reset comes back in a heartbeat reply (`gpu_resets`); the agent clears the mark and looks again at once, so a GPU
whose fault is still there (uncorrected ECC errors counted since the driver loaded, a GPU fallen off the bus) is
marked again. An XID is an event, not a state: once reset, it marks the GPU again only if it happens again.
Marks and the resets applied are kept in the state dir (`gpu-health.json`): a restarted agent does not forget.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Callable
from pathlib import Path

from nodeagent import protocol

log = logging.getLogger("euler.nodeagent.gpuhealth")

# The XIDs after which a GPU gets no new job until an operator resets it. From NVIDIA's "XID Errors" catalogue
# (docs.nvidia.com/deploy/xid-errors), those whose resolution is a GPU reset or a node drain rather than
# an application fix: 48 double-bit ECC error; 61, 62 internal micro-controller breakpoint/halt; 63, 64 ECC
# page retirement or row remapping (recording) failure; 74 NVLink error; 79 GPU has fallen off the bus;
# 92 high single-bit ECC error rate; 94 contained and 95 uncontained ECC error; 119, 120 GSP RPC timeout and
# GSP error; 140 unrecovered ECC error. Application faults (13 graphics engine exception, 31 MMU fault, 43
# GPU stopped processing, 45 preemptive cleanup, 68, 109 ...) are the job's own and mark nothing.
CRITICAL_XIDS = frozenset({48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120, 140})

# NVML constants (pynvml's names), here so that the fake NVML of the tests need not define them.
EVENT_XID = 0x8  # nvmlEventTypeXidCriticalError: despite its name, NVML reports every XID with it
ERROR_TIMEOUT = 10  # NVML_ERROR_TIMEOUT: nvmlEventSetWait saw no event
ERROR_GPU_IS_LOST = 15  # NVML_ERROR_GPU_IS_LOST
MEMORY_ERROR_UNCORRECTED = 1  # NVML_MEMORY_ERROR_TYPE_UNCORRECTED
VOLATILE_ECC = 0  # NVML_VOLATILE_ECC: counted since the driver loaded (a GPU reset clears it)


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _code(nvml, exc: Exception) -> int | None:
    return getattr(exc, "value", None) if isinstance(exc, nvml.NVMLError) else None


def xid_reason(xid: int) -> str | None:
    """The health reason of an XID event, or None when it is not one that marks the GPU."""
    return f"XID {xid}" if xid in CRITICAL_XIDS else None


class GpuHealth:
    """Marks per GPU UUID from NVML events and counters; `on_unhealthy(uuid, reason)` runs once per new mark."""

    def __init__(
        self, nvml, on_unhealthy: Callable[[str, str], None] | None = None, *, state_file: Path | None = None
    ) -> None:
        self.nvml = nvml
        self.on_unhealthy = on_unhealthy
        self.state_file = state_file
        self.marks: dict[str, str] = {}  # uuid -> reason
        self.resets: dict[str, int] = {}  # uuid -> the last reset number applied
        if state_file is not None:
            with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
                saved = json.loads(state_file.read_text())
                self.marks = {str(k): str(v) for k, v in saved.get("marks", {}).items()}
                self.resets = {str(k): int(v) for k, v in saved.get("resets", {}).items()}
        self.index: dict[str, int] = {}
        self._lock = threading.Lock()
        self._events = None
        self._handles: dict[str, object] = {}

    # --- reading NVML ----------------------------------------------------------------------------
    def open(self) -> None:
        """Find the GPUs and register for XID events (a GPU that cannot register is still checked for ECC)."""
        nvml = self.nvml
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            uuid = _text(nvml.nvmlDeviceGetUUID(handle))
            self._handles[uuid], self.index[uuid] = handle, index
        try:
            self._events = nvml.nvmlEventSetCreate()
        except nvml.NVMLError as exc:
            log.warning("NVML events unavailable (%s): XID errors are not watched, ECC counters are", exc)
            return
        for uuid, handle in self._handles.items():
            try:
                nvml.nvmlDeviceRegisterEvents(handle, EVENT_XID, self._events)
            except nvml.NVMLError as exc:
                log.warning("GPU %s: XID events unavailable (%s)", uuid, exc)

    def wait_events(self, timeout_ms: int) -> None:
        """Wait up to `timeout_ms` for one NVML event and act on it (XIDs only)."""
        nvml = self.nvml
        if self._events is None:
            return
        try:
            data = nvml.nvmlEventSetWait(self._events, timeout_ms)
        except nvml.NVMLError as exc:
            if _code(nvml, exc) != ERROR_TIMEOUT:
                log.debug("nvmlEventSetWait: %s", exc)
            return
        if not int(data.eventType) & EVENT_XID:
            return
        xid = int(data.eventData)
        try:
            uuid = _text(nvml.nvmlDeviceGetUUID(data.device))
        except nvml.NVMLError:
            uuid = ""
        reason = xid_reason(xid)
        if reason is None:
            log.info("GPU %s: XID %s (the job's own fault: the GPU stays healthy)", uuid or "?", xid)
        elif uuid:
            self.mark(uuid, reason)
        else:  # NVML could not say which GPU: every GPU is suspect
            for each in list(self._handles):
                self.mark(each, reason)

    def check(self, uuids: list[str] | None = None) -> None:
        """Read the counters that still show a fault: uncorrected ECC errors, a GPU that NVML lost."""
        nvml = self.nvml
        for uuid in uuids if uuids is not None else list(self._handles):
            handle = self._handles.get(uuid)
            if handle is None:
                continue
            try:
                count = int(nvml.nvmlDeviceGetTotalEccErrors(handle, MEMORY_ERROR_UNCORRECTED, VOLATILE_ECC))
            except nvml.NVMLError as exc:
                if _code(nvml, exc) == ERROR_GPU_IS_LOST:
                    self.mark(uuid, "GPU is lost (fallen off the bus)")
                continue  # no ECC on this card (NotSupported): nothing to count
            if count > 0:
                self.mark(uuid, f"{count} uncorrected ECC error{'s' if count != 1 else ''} (volatile)")

    # --- marks -----------------------------------------------------------------------------------
    def _save(self) -> None:
        """Under the lock: the marks and resets to the state file (write, then rename)."""
        if self.state_file is None:
            return
        tmp = self.state_file.with_suffix(".tmp")
        try:
            tmp.write_text(json.dumps({"marks": self.marks, "resets": self.resets}))
            tmp.replace(self.state_file)
        except OSError as exc:
            log.warning("cannot keep GPU health in %s: %s", self.state_file, exc)

    def mark(self, uuid: str, reason: str) -> None:
        with self._lock:
            if uuid in self.marks:
                return
            self.marks[uuid] = reason
            self._save()
        log.warning("GPU %s (%s) is unhealthy: %s; no new jobs go to it until an operator resets it", uuid,
                    self.index.get(uuid, "?"), reason)  # fmt: skip
        if self.on_unhealthy is not None:
            self.on_unhealthy(uuid, reason)

    def reason(self, uuid: str) -> str | None:
        with self._lock:
            return self.marks.get(uuid)

    def apply_resets(self, resets: dict[str, int]) -> list[str]:
        """An operator's resets from a heartbeat reply: clear each GPU's mark once per new number, then look
        again (a fault still there marks it again). Returns the UUIDs reset now."""
        done = []
        for uuid, number in resets.items():
            with self._lock:
                if self.resets.get(uuid, 0) >= number:
                    continue
                self.resets[uuid] = number
                cleared = self.marks.pop(uuid, None)
                self._save()
            done.append(uuid)
            if cleared:
                log.info("GPU %s reset by an operator (was: %s)", uuid, cleared)
        if done:
            self.check(done)
        return done

    def annotate(self, gpus: list[protocol.GpuInfo]) -> list[protocol.GpuInfo]:
        """The probe's GPUs with their health, as the heartbeat reports them."""
        with self._lock:
            marks = dict(self.marks)
        limit = protocol.MAX_GPU_HEALTH_REASON_CHARS
        return [
            g.model_copy(update={"healthy": False, "health_reason": marks[g.uuid][:limit]}) if g.uuid in marks else g
            for g in gpus
        ]
