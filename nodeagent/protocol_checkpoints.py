"""The checkpoints part of the wire protocol (issue 36): a job's checkpoint directory, uploaded by its node every
interval and at every stop, and placed in the next attempt's container before it starts.

The flow (paths relative to `<control plane>/node-api/v1/`, node-authenticated, fenced on the attempt like outputs):

1. The agent reads the directory from the container (the engine's archive, as `docker cp`: links never followed),
   spools its regular files, hashes them, and POSTs a CheckpointManifest to PATH_ATTEMPT_CHECKPOINTS. The server
   answers a CheckpointPlan: a pending checkpoint's id and one upload per blob (a file's content, by sha256) that it
   does not hold yet for this job. An unchanged file is never sent again. A checkpoint over the limits below (or the
   project's output quota) is refused whole: 4xx with a stable code, the reason recorded on the job.
2. The agent sends each blob as outputs are sent: "chunks" (PUT PATH_ATTEMPT_CHECKPOINT_BLOB with `Content-Range`,
   GET it for the offset held) or "put" (a presigned PUT, then POST PATH_ATTEMPT_CHECKPOINT_BLOB_DONE).
3. POST PATH_ATTEMPT_CHECKPOINT_COMMIT: the server commits the checkpoint as one set, only if every blob it names
   is stored and verified; else 409 `checkpoint_incomplete`. Only committed checkpoints are ever restored.

A new attempt's Assignment carries `checkpoint` (CheckpointSpec); with `restore_id` set, the agent GETs
PATH_ATTEMPT_CHECKPOINT_RESTORE, downloads each file (checked against its sha256) and puts them in the created,
not yet started container at the checkpoint's path.

The limits are here, once: the agent stops reading at them (so a hostile directory never holds a stop) and the
server refuses past them (a modified agent).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from nodeagent.protocol_base import MAX_OUTPUT_PATH_CHARS, Lenient, Sha256Hex, Strict

# One checkpoint holds at most this many files and bytes (the agent refuses it whole past either).
MAX_CHECKPOINT_FILES = 10_000
MAX_CHECKPOINT_BYTES = 16 * 1024**3
# The longest the agent reads a checkpoint from the engine at a stop (the stop never waits longer on it).
STOP_CHECKPOINT_SECONDS = 60.0
# A job's declaration: bounds of `interval_seconds` and `keep_last`.
MIN_CHECKPOINT_INTERVAL = 5
MAX_CHECKPOINT_INTERVAL = 7 * 24 * 3600
DEFAULT_KEEP_LAST = 2
MAX_KEEP_LAST = 20

PATH_ATTEMPT_CHECKPOINTS = "attempts/{attempt_id}/checkpoints"
PATH_ATTEMPT_CHECKPOINT_BLOB = "attempts/{attempt_id}/checkpoints/blobs/{blob_id}"
PATH_ATTEMPT_CHECKPOINT_BLOB_DONE = "attempts/{attempt_id}/checkpoints/blobs/{blob_id}/done"
PATH_ATTEMPT_CHECKPOINT_COMMIT = "attempts/{attempt_id}/checkpoints/{checkpoint_id}/commit"
PATH_ATTEMPT_CHECKPOINT_RESTORE = "attempts/{attempt_id}/checkpoints/restore"
PATH_ATTEMPT_CHECKPOINT_BLOB_DATA = "attempts/{attempt_id}/checkpoints/blobs/{blob_id}/data"  # GET: a restore's bytes

CheckpointPath = Annotated[str, StringConstraints(min_length=1, max_length=MAX_OUTPUT_PATH_CHARS)]


class CheckpointSpec(Lenient):
    """In an Assignment: the directory to checkpoint, how often, and the committed checkpoint to restore first."""

    path: Annotated[str, StringConstraints(min_length=2, max_length=MAX_OUTPUT_PATH_CHARS, pattern=r"^/")]
    interval_seconds: int = Field(ge=MIN_CHECKPOINT_INTERVAL)
    restore_id: int | None = None  # None: start with an empty directory


class CheckpointFile(Strict):
    # '/'-separated and relative to the checkpoint directory (`/ckpt/a/b` is `a/b`): no '.', '..' or empty parts.
    path: CheckpointPath
    size: int = Field(ge=0)
    sha256: Sha256Hex


class CheckpointManifest(Strict):
    reason: Literal["periodic", "stop"]
    files: list[CheckpointFile] = Field(default_factory=list, max_length=MAX_CHECKPOINT_FILES)
    skipped: int = Field(default=0, ge=0)  # links, devices and other entries that are not regular files: not kept
    # The agent's collection refused the checkpoint (too many files, too many bytes, the time allowed): `files` is
    # then [] and the server records the reason on the job (no checkpoint row).
    refused: Annotated[str, StringConstraints(max_length=500)] = ""


class BlobUpload(Lenient):
    blob_id: int
    sha256: str
    size: int
    method: Literal["chunks", "put"]
    url: str = ""  # "put": the presigned URL; "chunks": "" (use PATH_ATTEMPT_CHECKPOINT_BLOB)
    headers: dict[str, str] = Field(default_factory=dict)
    offset: int = 0


class CheckpointPlan(Lenient):
    checkpoint_id: int
    seq: int
    uploads: list[BlobUpload] = Field(default_factory=list)  # the blobs the server does not hold complete yet


class CheckpointCommitted(Lenient):
    checkpoint_id: int
    seq: int
    committed: bool


class RestoreFile(Lenient):
    path: str  # relative to the checkpoint directory
    size: int
    sha256: Sha256Hex
    url: str  # absolute: the node route PATH_ATTEMPT_CHECKPOINT_BLOB_DATA (authenticated) or a presigned GET
    authenticated: bool = True


class CheckpointRestore(Lenient):
    checkpoint_id: int
    seq: int
    files: list[RestoreFile] = Field(default_factory=list)
