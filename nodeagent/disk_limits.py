"""A job's disk limits as plain decisions (pure): past the limit or not, what the job is told, how often to
measure, and where an inspected container keeps its writable layer and volumes."""

from __future__ import annotations

from typing import NamedTuple

DISK_CHECK_SECONDS = 1.0  # the issue asks for at least every 2 s; a measurement itself takes a few ms
# A container the agent has just started is first measured this much later: its layer is empty at the start, and
# measuring it then (an inspect and a walk: the agent's CPU and the engine's, ~2 ms each) only took from the start
# path of every job. One it adopts after a restart is measured at once.
DISK_FIRST_CHECK_SECONDS = 0.25
DISK_GUARD_DUTY = 0.2  # the share of its time a guard may spend measuring: slow walks are spaced out
# Inodes (files, directories, links) a job may create on the node: a walk stops past it, which also bounds the
# walk's cost (about 1 s per 250,000 entries on an idle core).
DEFAULT_MAX_INODES = 500_000


def inode_message(inodes: int, limit: int) -> str:
    return (
        f"the job created more than {limit} files and directories on the node (counted {inodes}), past the node's "
        f"inode limit (EULER_NODE_JOB_MAX_INODES); stopped"
    )


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


def upper_dir(attrs: dict) -> str | None:
    """The directory of the container's writable layer (overlay2, overlay, fuse-overlayfs), or None."""
    driver = attrs.get("GraphDriver") or {}
    found = (driver.get("Data") or {}).get("UpperDir")
    return str(found) if found else None
