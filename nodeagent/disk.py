"""A job's disk on this node: the storage driver's quota where it has one, else the agent measures and stops.

`disk_bytes` bounds the container's writable layer. Where the storage driver enforces `storage_opt size`
(overlay2 on xfs with pquota, btrfs, zfs, devicemapper) the container also gets that quota; where it does not
(overlay2 on ext4, the usual case) the agent measures the writable layer (Docker's SizeRw) at least every
`DISK_CHECK_SECONDS` and kills the container once it is past the limit: the attempt ends `disk_limit`.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable

from docker import errors as derrors

log = logging.getLogger("euler.nodeagent.disk")

DISK_CHECK_SECONDS = 1.0  # the issue asks for at least every 2 s; a measurement itself takes a few ms


def over_limit(used: int | None, limit: int) -> bool:
    """Pure: a measured writable layer past the job's `disk_bytes` (0: not limited)."""
    return limit > 0 and used is not None and used > limit


def limit_message(used: int, limit: int) -> str:
    return f"the job wrote {used} bytes on the node, past its disk_bytes of {limit}; stopped"


def writable_layer_bytes(api, container_id: str) -> int | None:
    """Docker's SizeRw for the container (what it wrote to its writable layer), None when it is gone."""
    try:
        attrs = api._result(api._get(api._url("/containers/{0}/json", container_id), params={"size": 1}), True)
    except derrors.NotFound:
        return None
    return int(attrs.get("SizeRw") or 0)


def storage_opt_supported(api, image: str, *, name_prefix: str) -> tuple[bool, str]:
    """Whether the storage driver takes `storage_opt size`: creates (never starts) a probe container with it."""
    name = f"{name_prefix}-storage-probe-{uuid.uuid4().hex[:8]}"
    try:
        host_config = api.create_host_config(storage_opt={"size": "1G"})
        cid = api.create_container(image, command=["true"], host_config=host_config, name=name)["Id"]
    except derrors.APIError as exc:
        return False, str(exc.explanation or exc)[:300]
    try:
        api.remove_container(cid, force=True)
    except derrors.APIError:
        log.warning("could not remove the storage probe container %s", name)
    return True, ""


class StorageQuota:
    """Detected once, on the first job with a disk limit, with that job's (already present) image."""

    def __init__(self, api, *, name_prefix: str) -> None:
        self.api = api
        self.name_prefix = name_prefix
        self.supported: bool | None = None
        self._lock = threading.Lock()

    def available(self, image: str) -> bool:
        with self._lock:
            if self.supported is None:
                self.supported, why = storage_opt_supported(self.api, image, name_prefix=self.name_prefix)
                if self.supported:
                    log.info("the storage driver enforces storage_opt size: jobs get a disk quota")
                else:
                    log.info("no storage_opt size here (%s): the agent measures each job's writable layer", why)
            return self.supported


class DiskGuard:
    """Measures one container's writable layer every DISK_CHECK_SECONDS; past `limit`, kills it and calls
    `exceeded(message)` once."""

    def __init__(
        self,
        api,
        container_id: str,
        limit: int,
        exceeded: Callable[[str], None],
        *,
        interval: float = DISK_CHECK_SECONDS,
    ):
        self.api = api
        self.container_id = container_id
        self.limit = limit
        self.exceeded = exceeded
        self.interval = interval
        self.used = 0
        self.crossed_at: float | None = None  # monotonic time of the measurement that found it past the limit
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name=f"euler-disk-{container_id[:12]}")

    def start(self) -> DiskGuard:
        self.thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                used = writable_layer_bytes(self.api, self.container_id)
            except Exception:  # noqa: BLE001 - a failed measurement is retried; it must not end the job
                log.warning("measuring the writable layer of %s failed", self.container_id[:12], exc_info=True)
                used = None
            if used is not None:
                self.used = used
                if over_limit(used, self.limit):
                    self.crossed_at = time.monotonic()
                    # The reason first: the run must not see the container die before it knows why.
                    self.exceeded(limit_message(used, self.limit))
                    try:
                        self.api.kill(self.container_id)
                    except derrors.APIError:
                        pass  # it ended on its own meanwhile
                    return
            self._stop.wait(self.interval)
