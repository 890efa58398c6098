"""The kernel's own record of an OOM kill in a container's memory cgroup, read from its log (/dev/kmsg).

The engine's `OOMKilled` flag and `oom` event come from containerd watching the container's memory cgroup, and
containerd drops the notification when the cgroup is already gone by the time it looks: a job killed for its
memory limit that exits at once (the usual case) goes unreported on a loaded host. The kernel writes its
`oom-kill:` summary, naming the memory cgroup (`/docker/<id>` under cgroupfs, `…/docker-<id>.scope` under systemd,
the same for runc and runsc), before the killed process is gone, so the record is there when the exit is.

Only kernel records count (facility 0): a process on the host that may write /dev/kmsg writes user-facility
records, and a job's container has no /dev/kmsg. The summary line is rate-limited by the kernel (10 in 5 s): "not
found" is not proof, and the caller still asks the engine.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Iterable

KMSG = "/dev/kmsg"
MAX_RECORDS = 100_000  # the ring buffer holds far fewer; a bound on a log that fills as fast as it is read
_MEMCG = re.compile(r"(?:oom_memcg|task_memcg)=([^,\s]*)")


def killed_in(records: Iterable[str], container_id: str) -> bool:
    """Whether one of the kernel's log records (as /dev/kmsg gives them: `pri,seq,usec,flags;message`) is an
    OOM kill in the container's memory cgroup (pure). `container_id` is the engine's full id."""
    if len(container_id) < 64:
        return False  # a short id could match another container's
    for record in records:
        prefix, _, message = record.partition(";")
        try:
            facility = int(prefix.split(",", 1)[0]) >> 3
        except ValueError:
            continue
        if facility != 0 or not message.startswith("oom-kill:"):
            continue
        if any(container_id in memcg for memcg in _MEMCG.findall(message)):
            return True
    return False


def read_records(path: str = KMSG) -> list[str]:
    """Every record in the kernel's log buffer, oldest first; OSError when it cannot be read (no permission:
    `kernel.dmesg_restrict` for an agent not root; no such device in a container)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    records: list[str] = []
    try:
        while len(records) < MAX_RECORDS:
            try:
                data = os.read(fd, 8192)
            except BlockingIOError:
                break  # the end of the buffer
            except OSError as exc:
                if exc.errno == errno.EPIPE:
                    continue  # records overwritten while reading: the next read goes on from the oldest kept
                raise
            if not data:
                break
            records.append(data.decode("utf-8", errors="replace").split("\n", 1)[0])
    finally:
        os.close(fd)
    return records


def kernel_reports_oom_kill(container_id: str, *, path: str = KMSG) -> bool | None:
    """Whether the kernel's log holds an OOM kill in the container's memory cgroup; None when it cannot be read."""
    try:
        return killed_in(read_records(path), container_id)
    except OSError:
        return None
