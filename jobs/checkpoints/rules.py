"""Pure rules of checkpoints: a submission's `checkpoint`, whether a node's manifest may become a checkpoint (the
shared limits, names, the project's quota), and which checkpoints and blobs retention keeps.

Plain functions over plain data; a refusal is an InvalidInput (or QuotaExceeded) with a stable code."""

from __future__ import annotations

from dataclasses import dataclass

from euler.errors import InvalidInput
from jobs.outputs import rules as output_rules
from nodeagent import protocol_checkpoints as pc

REFUSED_REASON = "checkpoint_refused"  # the JobEvent reason of a checkpoint the agent or the server refused


def spec(value) -> dict | None:
    """`checkpoint`: {"path": "/ckpt", "interval_seconds": 300, "keep_last": 2} (interval and keep_last optional)."""
    code = "invalid_checkpoint"
    if value is None:
        return None
    if not isinstance(value, dict) or "path" not in value or set(value) - {"path", "interval_seconds", "keep_last"}:
        raise InvalidInput('checkpoint is {"path": "/ckpt", "interval_seconds": 300, "keep_last": 2}.', code=code)
    path = output_rules.container_path(value["path"], what="checkpoint.path", code=code)
    interval = value.get("interval_seconds", 300)
    low, high = pc.MIN_CHECKPOINT_INTERVAL, pc.MAX_CHECKPOINT_INTERVAL
    if isinstance(interval, bool) or not isinstance(interval, int) or not low <= interval <= high:
        raise InvalidInput(f"checkpoint.interval_seconds is an integer from {low} to {high}.", code=code)
    keep = value.get("keep_last", pc.DEFAULT_KEEP_LAST)
    if isinstance(keep, bool) or not isinstance(keep, int) or not 1 <= keep <= pc.MAX_KEEP_LAST:
        raise InvalidInput(f"checkpoint.keep_last is an integer from 1 to {pc.MAX_KEEP_LAST}.", code=code)
    return {"path": path, "interval_seconds": interval, "keep_last": keep}


@dataclass(frozen=True)
class Refusal:
    code: str  # checkpoint_too_many_files | checkpoint_too_large | checkpoint_bad_name | quota_exceeded | ...
    message: str


def check_manifest(files: list[pc.CheckpointFile], *, held: set[str], quota_left: int) -> Refusal | None:
    """Why these files cannot be one checkpoint (None: they can). The server re-checks what the agent checks (a
    modified agent): the shared limits, valid unique relative names, no file under another file's name; then the
    project's output quota, charged for the blobs it does not hold yet (`held`: sha256s of this job's blobs)."""
    if len(files) > pc.MAX_CHECKPOINT_FILES:
        return Refusal("checkpoint_too_many_files", f"more than {pc.MAX_CHECKPOINT_FILES} files in one checkpoint")
    total = sum(f.size for f in files)
    if total > pc.MAX_CHECKPOINT_BYTES:
        return Refusal("checkpoint_too_large", f"{total} bytes: over {pc.MAX_CHECKPOINT_BYTES} bytes in one checkpoint")
    names: set[str] = set()
    dirs: set[str] = set()
    for f in files:
        if output_rules.output_path(f.path) is None or f.path in names:
            return Refusal("checkpoint_bad_name", f"{output_rules.shown(f.path)!r} is not a valid, unique name")
        names.add(f.path)
        parts = f.path.split("/")
        dirs.update("/".join(parts[:i]) for i in range(1, len(parts)))
    clash = names & dirs
    if clash:
        name = output_rules.shown(sorted(clash)[0])
        return Refusal("checkpoint_bad_name", f"{name!r} is both a file and a directory")
    new = {f.sha256: f.size for f in files if f.sha256 not in held}
    needed = sum(output_rules.charge(size) for size in new.values())
    if needed > quota_left:
        return Refusal("quota_exceeded", f"{needed} new bytes do not fit in the project's output storage quota "
                                         f"({quota_left} bytes left)")  # fmt: skip
    return None


def to_delete(committed_seqs: list[int], *, keep_last: int) -> list[int]:
    """The committed checkpoints retention removes: all but the newest `keep_last`."""
    return sorted(committed_seqs, reverse=True)[keep_last:]


def unreferenced(blobs: dict[int, str], kept_files: list[list[dict]]) -> list[int]:
    """Ids of blobs (id → sha256) that no kept checkpoint's files name."""
    named = {f["sha256"] for files in kept_files for f in files}
    return sorted(pk for pk, sha in blobs.items() if sha not in named)
