"""What this web process learnt of each node's recent heartbeats (beside its cached row, memory.py): the last
body and its fingerprints, when the hooks last ran, what it last wrote to Redis; and when a heartbeat last
reached Redis at all. Plain per-process memory: losing it only sends a heartbeat down the verifying path."""

from __future__ import annotations

import json
from dataclasses import dataclass

_MAX_NODES = 100_000
_intake = {"at": 0.0}


@dataclass
class Local:
    """What this process knows of a node's recent heartbeats (beside its cached row)."""

    body: bytes = b""
    fp: str = ""  # change fingerprint of `body`
    rfp: str = ""  # running fingerprint of `body`
    usage: str = ""  # usage JSON of `body`
    hooks_rfp: str | None = None  # the running fingerprint when the hooks last ran
    hooks_at: float | None = None  # when they last ran (0: they asked for the next heartbeat)
    iv_written: float = 0.0
    iv_at: float = 0.0
    usage_written: str = ""


_local: dict[int, Local] = {}


def entry(node_id: int) -> Local:
    local = _local.get(node_id)
    if local is None:
        if len(_local) >= _MAX_NODES:
            _local.clear()
        local = _local[node_id] = Local()
    return local


def hooks_ran(node_id: int, rfp: str | None, at: float | None) -> None:
    local = entry(node_id)
    local.hooks_rfp, local.hooks_at = rfp, at


def last_intake() -> float:
    """When this process last saw a heartbeat reach Redis (Unix time; 0: not since it started)."""
    return _intake["at"]


def set_last_intake(ts: float) -> None:
    """As if the last heartbeat reached Redis at `ts` (tests: a quiet spell)."""
    _intake["at"] = ts


def noted_intake(now: float) -> None:
    """A heartbeat reached Redis (the verifying path saw the intake time, and noted a gap if there was one)."""
    if now > _intake["at"]:
        _intake["at"] = now


def wrote(node_id: int, interval: float, usage: str, now: float) -> None:
    """The verifying path wrote this node's interval and usage to Redis."""
    local = entry(node_id)
    local.iv_written, local.iv_at, local.usage_written = interval, now, usage


def local(node_id: int) -> Local | None:
    """What this process learnt of the node's recent heartbeats (None: nothing yet)."""
    return _local.get(node_id)


def usage_json(usage: dict) -> str:
    return json.dumps(usage, separators=(",", ":"))


def forget() -> None:
    """A failed batch: what was written to Redis is unknown, write it again."""
    _local.clear()


def reset() -> None:
    """Forget it all (tests)."""
    _local.clear()
    _intake["at"] = 0.0
