"""A job's disk on this node: the storage driver's quota where it has one, and the agent measures and stops.

`disk_bytes` bounds what the job writes on the node: its writable layer plus the anonymous volumes that its
image's `VOLUME`s give it (they live under Docker's data root, outside the writable layer and outside any
`storage_opt size` quota). Where the storage driver enforces `storage_opt size` (overlay2 on xfs with pquota,
btrfs, zfs, devicemapper) the container also gets that quota on its writable layer. Either way the agent
measures the writable layer plus each volume mount at least every `DISK_CHECK_SECONDS` and kills the container
once the sum is past the limit: the attempt ends `disk_limit`.

What counts is what the file system allocated, never what files claim: the writable layer's directory (overlay2's
`UpperDir`) is walked like a volume, summing `st_blocks` (a file grown with `fallocate --keep-size` has an
apparent size of 0 and all its blocks; Docker's `SizeRw` sums apparent sizes and would miss it), and every
file, directory and link counts as one inode: past the node's `EULER_NODE_JOB_MAX_INODES` the job is stopped
too (`disk_limit`, saying so), since millions of empty files fill a file system's inode table without a byte.
Only where the layer has no directory to walk (another storage driver) or the agent cannot read it is `SizeRw`
used.

A walk costs one stat per file, so a job with millions of files would make the guard spin: a measurement
may take at most `DISK_GUARD_DUTY` of the guard's time (after a 2 s measurement the next comes 8 s later).
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterable

from docker import errors as derrors

from nodeagent.disk_limits import (
    DISK_CHECK_SECONDS,
    VolumeMount,
    inode_message,
    limit_message,
    next_check_in,
    over_limit,
    upper_dir,
    volume_mounts,
)
from nodeagent.disk_walk import DIR_FLAGS, Unmeasurable, Usage, tree_usage

log = logging.getLogger("euler.nodeagent.disk")


VOLUME_RELEASE_SECONDS = 10.0


def remove_volumes(api, names: Iterable[str], *, wait: float = VOLUME_RELEASE_SECONDS, sleep=time.sleep) -> None:
    """Remove these volumes if they outlived their container (removed from outside without `-v`); one already
    gone is left alone. The engine releases a removed container's hold on its volumes after `docker rm -f`
    returns (seen on 20.10: 409 "volume is in use" for a moment), so an in-use answer is asked again for up to
    `wait` seconds; a volume still in use after that (its container kept) is left alone."""
    pending, delay = list(names), 0.1
    deadline = time.monotonic() + wait
    while pending:
        busy = []
        for name in pending:
            try:
                api.remove_volume(name)
                log.info("removed volume %s that outlived its container", name[:12])
            except derrors.NotFound:
                pass
            except derrors.APIError as exc:
                if exc.status_code == 409:
                    busy.append(name)
                else:
                    log.warning("could not remove volume %s: %s", name[:12], exc)
        pending = busy
        if not pending or time.monotonic() + delay > deadline:
            break
        sleep(delay)
        delay = min(delay * 2, 1.0)
    for name in pending:
        log.info("volume %s is still in use: left in place", name[:12])


def container_disk(api, container_id: str) -> tuple[str | None, list[VolumeMount]] | None:
    """The writable layer's directory (None: the driver has none) and the volume mounts; None when it is gone."""
    try:
        attrs = api.inspect_container(container_id)
    except derrors.NotFound:
        return None
    return upper_dir(attrs), volume_mounts(attrs)


def size_rw(api, container_id: str) -> int | None:
    """Docker's SizeRw (apparent sizes: the fallback where the layer cannot be walked); None when it is gone."""
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
                    log.info(
                        "no storage_opt size here (%s): the agent measures each job's writable layer and volumes", why
                    )
            return self.supported


class VolumeAccess:
    """Whether this agent can walk Docker's volumes (`<data root>/volumes`): checked once, on the first job with
    a disk limit. Where it cannot (not root, or in a container without the data root mounted at its path), the
    executor mounts the image's VOLUMEs as tmpfs instead, charged to the job's memory (see Executor)."""

    def __init__(self, api) -> None:
        self.api = api
        self.readable: bool | None = None
        self._lock = threading.Lock()

    def available(self) -> bool:
        with self._lock:
            if self.readable is None:
                root = ""
                try:
                    root = str(self.api.info().get("DockerRootDir") or "")
                    os.close(os.open(os.path.join(root, "volumes"), DIR_FLAGS))
                    self.readable = bool(root)
                except (OSError, derrors.APIError) as exc:
                    self.readable = False
                    log.info("cannot read Docker's volumes under %r (%s): image VOLUMEs become tmpfs", root, exc)
            return self.readable


class DiskGuard:
    """Measures one container's writable layer and volumes every DISK_CHECK_SECONDS (less often when that is
    slow: `next_check_in`), the first time after `first_in` seconds (DISK_FIRST_CHECK_SECONDS for a container just
    started); past `limit`, or when a volume cannot be measured, kills it and calls `exceeded(message)` once."""

    def __init__(
        self,
        api,
        container_id: str,
        limit: int,
        exceeded: Callable[[str], None],
        *,
        interval: float = DISK_CHECK_SECONDS,
        max_inodes: int = 0,
        first_in: float = 0.0,
    ):
        self.api = api
        self.container_id = container_id
        self.limit = limit
        self.max_inodes = max_inodes  # 0: not limited
        self.inodes = 0
        self._fallback_logged = False
        self.exceeded = exceeded
        self.interval = interval
        self.first_in = first_in
        self.used = 0
        self._slow_logged = False
        self.volumes: set[str] = set()  # names of the container's volumes, seen by a measurement
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name=f"euler-disk-{container_id[:12]}")

    def start(self) -> DiskGuard:
        self.thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def measure(self) -> int | None:
        """The writable layer plus every volume mount, in allocated bytes (inodes in `self.inodes`); None when
        the container is gone."""
        found = container_disk(self.api, self.container_id)
        if found is None:
            return None
        upper, volumes = found
        self.volumes.update(v.name for v in volumes if v.name)
        used = Usage(0, 0)
        if upper is not None:
            try:
                used = self._walk(upper, used)
            except Unmeasurable as exc:
                if not self._fallback_logged:
                    self._fallback_logged = True
                    log.info("cannot walk the writable layer of %s (%s): SizeRw", self.container_id[:12], exc)
                upper = None
        if upper is None:
            rw = size_rw(self.api, self.container_id)
            if rw is None:
                return None
            used = Usage(rw, 0)
        for volume in volumes:
            try:
                used = self._walk(volume.source, used)
            except Unmeasurable as exc:
                raise Unmeasurable(f"the job's volume {volume.destination}: {exc}") from None
        self.inodes = used.inodes
        return used.bytes

    def _walk(self, root: str, so_far: Usage) -> Usage:
        stop_bytes = max(self.limit - so_far.bytes, 0) if self.limit > 0 else None
        stop_inodes = max(self.max_inodes - so_far.inodes, 0) if self.max_inodes > 0 else None
        found = tree_usage(root, stop_bytes=stop_bytes, stop_inodes=stop_inodes)
        return Usage(so_far.bytes + found.bytes, so_far.inodes + found.inodes)

    def _run(self) -> None:
        if self.first_in > 0:
            self._stop.wait(self.first_in)
        while not self._stop.is_set():
            began = time.monotonic()
            message = ""
            try:
                used = self.measure()
            except Unmeasurable as exc:
                used, message = None, f"{exc}: its disk use cannot be measured against disk_bytes; stopped"
            except Exception:  # noqa: BLE001 - a failed measurement is retried; it must not end the job
                log.warning("measuring the disk of %s failed", self.container_id[:12], exc_info=True)
                used = None
            if used is not None:
                self.used = used
                if over_limit(used, self.limit):
                    message = limit_message(used, self.limit)
                elif over_limit(self.inodes, self.max_inodes):
                    message = inode_message(self.inodes, self.max_inodes)
            if message:
                # The reason first: the run must not see the container die before it knows why.
                self.exceeded(message)
                try:
                    self.api.kill(self.container_id)
                except derrors.APIError:
                    pass  # it ended on its own meanwhile
                return
            elapsed = time.monotonic() - began
            if elapsed > self.interval and not self._slow_logged:
                self._slow_logged = True
                log.info("measuring the disk of %s took %.1f s: measured less often", self.container_id[:12], elapsed)
            self._stop.wait(next_check_in(elapsed, interval=self.interval))
