"""A job's disk on this node: the storage driver's quota where it has one, and the agent measures and stops.

`disk_bytes` bounds what the job writes on the node: its writable layer plus the anonymous volumes that its
image's `VOLUME`s give it (they live under Docker's data root, outside the writable layer and outside any
`storage_opt size` quota). Where the storage driver enforces `storage_opt size` (overlay2 on xfs with pquota,
btrfs, zfs, devicemapper) the container also gets that quota on its writable layer. Either way the agent
measures the writable layer (Docker's SizeRw) plus each volume mount (a walk of its directory) at least every
`DISK_CHECK_SECONDS` and kills the container once the sum is past the limit: the attempt ends `disk_limit`.

A walk costs one stat per file, so a job with millions of files would make the guard spin: a measurement
may take at most `DISK_GUARD_DUTY` of the guard's time (after a 2 s measurement the next comes 8 s later).
"""

from __future__ import annotations

import errno
import logging
import os
import stat
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from typing import NamedTuple

from docker import errors as derrors

log = logging.getLogger("euler.nodeagent.disk")

DISK_CHECK_SECONDS = 1.0  # the issue asks for at least every 2 s; a measurement itself takes a few ms
DISK_GUARD_DUTY = 0.2  # the share of its time a guard may spend measuring: slow walks are spaced out
MAX_WALK_DEPTH = 128  # directory levels below a volume's root; one open fd per level while walking
MAX_SEEN_INODES = 100_000  # hard-linked inodes remembered per walk (counted once); past it, counted per link
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


class Unmeasurable(Exception):
    """A volume the guard cannot measure; the job is stopped rather than left unbounded."""


class _Over(Exception):
    """tree_bytes: the count passed `stop_above`; no need to walk on."""


def over_limit(used: int | None, limit: int) -> bool:
    """Pure: a measured writable layer past the job's `disk_bytes` (0: not limited)."""
    return limit > 0 and used is not None and used > limit


def limit_message(used: int, limit: int) -> str:
    return f"the job wrote {used} bytes on the node, past its disk_bytes of {limit}; stopped"


def next_check_in(elapsed: float, *, interval: float = DISK_CHECK_SECONDS, duty: float = DISK_GUARD_DUTY) -> float:
    """Pure: the wait after a measurement that took `elapsed` s, so that measuring stays within `duty`."""
    return max(interval, elapsed * (1 - duty) / duty)


class VolumeMount(NamedTuple):
    destination: str  # in the container
    source: str  # its directory on the host, under Docker's data root
    name: str  # the volume's name (anonymous: 64 hex digits)


def volume_mounts(attrs: dict) -> list[VolumeMount]:
    """The volume mounts of an inspected container.

    The spec builder expresses no volumes or binds, so these are the anonymous volumes of the image's VOLUMEs.
    """
    return [
        VolumeMount(str(m.get("Destination") or ""), str(m["Source"]), str(m.get("Name") or ""))
        for m in attrs.get("Mounts") or []
        if m.get("Type") == "volume" and m.get("Source")
    ]


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


def container_disk(api, container_id: str) -> tuple[int, list[VolumeMount]] | None:
    """Docker's SizeRw (what the job wrote to its writable layer) and its volume mounts; None when it is gone."""
    try:
        attrs = api._result(api._get(api._url("/containers/{0}/json", container_id), params={"size": 1}), True)
    except derrors.NotFound:
        return None
    return int(attrs.get("SizeRw") or 0), volume_mounts(attrs)


def tree_bytes(root: str, *, max_depth: int = MAX_WALK_DEPTH, stop_above: int | None = None) -> int:
    """Bytes allocated on disk under `root` (st_blocks × 512; sparse files count what they use), each inode once.

    Written for a tree the job controls: symlinks are never followed, other file systems are not entered,
    and every directory is opened relative to its parent's descriptor, so no path length hides anything.
    Entries that vanish mid-walk are skipped. With `stop_above`, the walk ends as soon as the count passes
    it (the answer is then a lower bound, enough to know the limit is crossed). Raises Unmeasurable when
    `root` cannot be opened (the agent cannot see Docker's data root) or the tree is deeper than `max_depth`.
    """
    try:
        top = os.open(root, _DIR_FLAGS)
    except OSError as exc:
        raise Unmeasurable(f"cannot open {root}: {exc.strerror}") from None
    top_stat = os.fstat(top)
    dev, total, seen = top_stat.st_dev, top_stat.st_blocks * 512, set()

    def scan(fd: int) -> list[str]:
        nonlocal total
        subdirs = []
        with os.scandir(fd) as entries:
            for entry in entries:
                try:
                    st = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                if st.st_nlink > 1 and not stat.S_ISDIR(st.st_mode):
                    if st.st_ino in seen:
                        continue
                    if len(seen) < MAX_SEEN_INODES:
                        seen.add(st.st_ino)
                total += st.st_blocks * 512
                if stop_above is not None and total > stop_above:
                    raise _Over
                if stat.S_ISDIR(st.st_mode) and st.st_dev == dev:
                    subdirs.append(entry.name)
        return subdirs

    stack = [(top, [])]
    try:
        stack[0] = (top, scan(top))
        while stack:
            fd, pending = stack[-1]
            if not pending:
                os.close(fd)
                stack.pop()
                continue
            name = pending.pop()
            try:
                child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
                    continue  # renamed, removed or swapped for a symlink since the scan
                raise
            if os.fstat(child).st_dev != dev:
                os.close(child)
                continue
            if len(stack) >= max_depth:
                os.close(child)
                raise Unmeasurable(f"its directories under {root} nest deeper than {max_depth} levels")
            stack.append((child, []))  # on the stack before the scan, so that the finally closes it
            stack[-1] = (child, scan(child))
    except _Over:
        pass
    except OSError as exc:  # e.g. a directory the job made unreadable, for an agent that is not root
        raise Unmeasurable(f"cannot read under {root}: {exc.strerror}") from None
    finally:
        for fd, _ in stack:
            os.close(fd)
    return total


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
                    os.close(os.open(os.path.join(root, "volumes"), _DIR_FLAGS))
                    self.readable = bool(root)
                except (OSError, derrors.APIError) as exc:
                    self.readable = False
                    log.info("cannot read Docker's volumes under %r (%s): image VOLUMEs become tmpfs", root, exc)
            return self.readable


class DiskGuard:
    """Measures one container's writable layer and volumes every DISK_CHECK_SECONDS (less often when that is
    slow: `next_check_in`); past `limit`, or when a volume cannot be measured, kills it and calls
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
        """The writable layer plus every volume mount, in bytes; None when the container is gone."""
        found = container_disk(self.api, self.container_id)
        if found is None:
            return None
        used, volumes = found
        self.volumes.update(v.name for v in volumes if v.name)
        for volume in volumes:
            try:
                used += tree_bytes(volume.source, stop_above=max(self.limit - used, 0))
            except Unmeasurable as exc:
                raise Unmeasurable(f"the job's volume {volume.destination}: {exc}") from None
        return used

    def _run(self) -> None:
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
