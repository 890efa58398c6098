"""The node-agent wire protocol, version 1: the only code shared by the server views and the daemon.

Both sides validate with these models. Requests from nodes are strict (unknown fields refused);
replies parsed by the agent ignore unknown fields so that a newer server can add to them.
Paths are relative to `<control plane>/node-api/v1/`. Authentication: `Authorization: Bearer euler_node_…`
(except enroll, which carries the one-time enrollment token in its body).
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints

from nodeagent.protocol_base import (  # noqa: F401  (re-exported: the limits are read as protocol.MAX_OUTPUT_...)
    CLIENT_KEEPALIVE_SECONDS,
    MAX_OUTPUT_CHUNK_BYTES,
    MAX_OUTPUT_FILES,
    MAX_OUTPUT_PATH_CHARS,
    MAX_OUTPUT_SKIPPED_LISTED,
    SERVER_KEEPALIVE_SECONDS,
    Lenient,
    Sha256Hex,
    Strict,
)
from nodeagent.protocol_checkpoints import (  # noqa: F401  (re-exported: protocol.CheckpointSpec, ...)
    MAX_CHECKPOINT_BYTES,
    MAX_CHECKPOINT_FILES,
    PATH_ATTEMPT_CHECKPOINT_BLOB,
    PATH_ATTEMPT_CHECKPOINT_BLOB_DATA,
    PATH_ATTEMPT_CHECKPOINT_BLOB_DONE,
    PATH_ATTEMPT_CHECKPOINT_COMMIT,
    PATH_ATTEMPT_CHECKPOINT_RESTORE,
    PATH_ATTEMPT_CHECKPOINTS,
    STOP_CHECKPOINT_SECONDS,
    BlobUpload,
    CheckpointCommitted,
    CheckpointFile,
    CheckpointManifest,
    CheckpointPlan,
    CheckpointRestore,
    CheckpointSpec,
    RestoreFile,
)
from nodeagent.protocol_outputs import (  # noqa: F401  (re-exported: both sides use protocol.OutputManifest, ...)
    OutputFile,
    OutputFileReply,
    OutputManifest,
    OutputPath,
    OutputSkip,
    OutputsPlan,
    OutputUpload,
)

PROTOCOL_VERSION = 1

PATH_ENROLL = "enroll"
PATH_HEARTBEAT = "heartbeat"
PATH_POLL = "poll"  # POST; long-poll held up to POLL_WAIT_SECONDS, answered at once when work arrives
PATH_ATTEMPT_REPORT = "attempts/{attempt_id}/report"
PATH_ATTEMPT_LOGS = "attempts/{attempt_id}/logs"
# POST by an agent that stops and leaves its jobs' containers running for its next start to adopt (Leaving): the
# server holds those attempts from being lost while the node is offline, for a while (LeavingReply.hold_seconds).
PATH_LEAVING = "leaving"
# POST by `euler-node reclaim` / `euler-node resume` on the host (the lender takes the machine back, or gives it
# again): {"grace": S} optional on reclaim. A node lifts only its own reclaim, never its lender's or the operator's.
PATH_RECLAIM = "reclaim"
PATH_RESUME = "resume"
# PUT by an approved agent whose configuration names its lender's terms (EULER_NODE_TERMS), once per start: the body
# of `PUT /api/v1/lending/{name}/terms`, checked the same way (never above the approved capacity); answers
# {"node": name, "terms": {...} or null}.
PATH_TERMS = "terms"
# Outputs (issue 24). The agent collects an ended container's declared paths into its spool, POSTs the manifest
# (OutputManifest) to PATH_ATTEMPT_OUTPUTS and gets an OutputsPlan: per accepted file either "chunks" (PUT raw bytes
# to PATH_ATTEMPT_OUTPUT_FILE with `Content-Range: bytes START-END/SIZE`, at most MAX_OUTPUT_CHUNK_BYTES each,
# answered OutputFileReply; a GET of the same path answers the offset the server holds, to resume) or "put" (one
# PUT of the whole file to a presigned object-store URL with the given headers, then a POST to
# PATH_ATTEMPT_OUTPUT_DONE). The server verifies each file's sha256 before it marks it complete. All of this
# happens before the attempt's `ended` report, which says how the outputs went (`AttemptReport.outputs`).
PATH_ATTEMPT_OUTPUTS = "attempts/{attempt_id}/outputs"
PATH_ATTEMPT_OUTPUT_FILE = "attempts/{attempt_id}/outputs/{file_id}"
PATH_ATTEMPT_OUTPUT_DONE = "attempts/{attempt_id}/outputs/{file_id}/done"
# Inputs: a GET, node-authenticated, allowed only to the node that holds an attempt whose job declared the output
# in `inputs_from` (an InputFile's `url` is this path, absolute, or a presigned object-store GET).
PATH_INPUT_FILE = "attempts/{attempt_id}/inputs/{output_id}"

POLL_WAIT_SECONDS = 25  # the long-poll's wait until a heartbeat reply says otherwise (`poll_wait`)
POLL_WAIT_MAX_SECONDS = 300  # the longest wait a poll may ask for (and a server may tell)
MAX_LOG_CHUNK_BYTES = 64 * 1024  # raw output bytes in one chunk
MAX_LOG_BATCH_CHUNKS = 64
# The largest log request body, in bytes of `encode_json` output: the agent sizes its batches against it and
# the server's log route accepts exactly this much. One chunk always fits: 64 KiB of control characters,
# each escaped as `\u00XX`, encode to 384 KiB.
MAX_LOG_REQUEST_BYTES = 4 * 1024 * 1024
# Outputs: the chunk size, the most files and skipped entries one manifest lists, the longest relative path (their
# values are in nodeagent/protocol_base.py, which the outputs models share; read them here: protocol.MAX_OUTPUT_...).
MAX_GPU_HEALTH_REASON_CHARS = 500

# Container labels the agent sets, used to adopt containers after a restart and to reap strays.
LABEL_MANAGED = "euler.managed"
LABEL_JOB = "euler.job"
LABEL_ATTEMPT = "euler.attempt"
LABEL_NODE = "euler.node"
# Which agent owns the container: unique to the node and its control plane (node names are not: two
# `make up` checkouts on one machine are both `local-<hostname>`). An agent adopts and reaps only its own.
LABEL_OWNER = "euler.owner"

Name = Annotated[str, StringConstraints(min_length=1, max_length=63, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")]
LabelKey = Annotated[str, StringConstraints(min_length=1, max_length=63, pattern=r"^[A-Za-z0-9][A-Za-z0-9._/-]*$")]
LabelValue = Annotated[str, StringConstraints(max_length=63, pattern=r"^[A-Za-z0-9._-]*$")]
ImagePattern = Annotated[str, StringConstraints(min_length=1, max_length=255, pattern=r"^[^\s@\[\]]+$")]


def encode_json(body: Any) -> bytes:
    """The agent's request bodies, byte for byte: compact, UTF-8 (not \\u-escaped). Sizes are measured on this."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")


# --- resources ------------------------------------------------------------------------------
class GpuInfo(Strict):
    uuid: Annotated[str, StringConstraints(min_length=1, max_length=128)]
    index: int = Field(ge=0, le=63)
    model: Annotated[str, StringConstraints(max_length=128)] = ""
    memory_bytes: int = Field(ge=0)
    memory_used_bytes: int = Field(default=0, ge=0)
    utilization: float = Field(default=0, ge=0, le=100)
    # GPU health (issue 26, nodeagent/gpuhealth.py): False after a critical XID event or an uncorrected ECC error;
    # the scheduler places nothing on it until an operator's reset (HeartbeatReply.gpu_resets) and the agent agree.
    healthy: bool = True
    health_reason: Annotated[str, StringConstraints(max_length=MAX_GPU_HEALTH_REASON_CHARS)] = ""


class GpuStat(Strict):
    """One GPU's figures over an attempt, sampled through NVML while it ran (nodeagent/gpustats.py)."""

    uuid: Annotated[str, StringConstraints(min_length=1, max_length=128)]
    samples: int = Field(default=0, ge=0)
    utilization_avg: float = Field(default=0, ge=0, le=100)  # percent of time a kernel ran, averaged over samples
    utilization_max: float = Field(default=0, ge=0, le=100)
    memory_peak_bytes: int = Field(default=0, ge=0)
    # "process": the job's own processes' memory on the GPU (nvmlDeviceGetComputeRunningProcesses, summed);
    # "device": the whole GPU's used memory (NVML gave no per-process figure; the job holds the GPU alone).
    memory_source: Literal["process", "device"] = "device"


# Isolation tiers, weakest first: "runc" (a namespaced container on the host's kernel), "sandbox" (a user-space
# kernel: gVisor's runsc). A job, a trust level or a lender asks for at least one of them.
ISOLATION_RUNC = "runc"
ISOLATION_SANDBOX = "sandbox"
ISOLATION_LEVELS = (ISOLATION_RUNC, ISOLATION_SANDBOX)
Isolation = Literal["runc", "sandbox"]
RuntimeName = Annotated[str, StringConstraints(min_length=1, max_length=63, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")]
MAX_RUNTIMES = 16


class RuntimeInfo(Strict):
    """A container runtime this node's engine offers, checked by a probe container (nodeagent/runtimes.py)."""

    name: RuntimeName  # as the engine knows it (`docker run --runtime=NAME`)
    sandbox: bool = False  # gVisor (runsc): the job's system calls meet a user-space kernel, not the host's
    # The job networks it runs: "none" (loopback only) and "default" (the agent's bridge and egress rules).
    networks: list[Literal["none", "default"]] = Field(default_factory=list, max_length=2)
    default: bool = False  # the engine's default runtime


class Resources(Strict):
    cpu_milli: int = Field(ge=0, le=10_000_000)
    memory_bytes: int = Field(ge=0)
    gpus: list[GpuInfo] = Field(default_factory=list, max_length=64)
    docker_version: Annotated[str, StringConstraints(max_length=64)] = ""
    # Free space of Docker's data root (plus what this node's jobs already wrote), capped by the lender;
    # None: unknown (the data root cannot be read from the agent and no cap is set).
    disk_bytes: int | None = Field(default=None, ge=0)
    capped: list[Literal["cpu", "memory", "disk", "gpus"]] = Field(default_factory=list, max_length=4)
    # The job network policy the agent enforces ("" from agents older than the policy), and why networked
    # jobs are refused when its rules could not be installed.
    job_egress: Literal["", "public", "none", "unrestricted"] = ""
    job_egress_error: Annotated[str, StringConstraints(max_length=500)] = ""
    # The lender's narrowing of images (EULER_NODE_ALLOWED_IMAGES, nodeagent/imageref.py patterns): the scheduler
    # places here only jobs whose image matches one; empty: every image the control plane's policy allows.
    allowed_images: list[ImagePattern] = Field(default_factory=list, max_length=64)
    # The runtimes that passed this agent's probe (older agents: none listed, the engine's default is used), and
    # the lender's own minimum isolation (EULER_NODE_MIN_ISOLATION; "" from older agents: none).
    runtimes: list[RuntimeInfo] = Field(default_factory=list, max_length=MAX_RUNTIMES)
    min_isolation: Literal["", "runc", "sandbox"] = ""


# --- enroll ---------------------------------------------------------------------------------
class EnrollRequest(Strict):
    protocol_version: int = PROTOCOL_VERSION
    token: Annotated[str, StringConstraints(min_length=1, max_length=256)]
    name: Name
    hostname: Annotated[str, StringConstraints(max_length=255)] = ""
    region: Annotated[str, StringConstraints(max_length=63, pattern=r"^[A-Za-z0-9._-]*$")] = ""
    labels: dict[LabelKey, LabelValue] = Field(default_factory=dict, max_length=64)
    agent_version: Annotated[str, StringConstraints(max_length=64)] = ""
    resources: Resources


class EnrollResponse(Lenient):
    node_id: int
    name: str
    credential: str  # euler_node_…: shown once; the agent keeps it in its state dir (0600)
    approval: Literal["pending", "approved", "rejected"]
    heartbeat_interval: float


# --- heartbeat ------------------------------------------------------------------------------
class RunningAttempt(Strict):
    attempt_id: int
    state: Literal["starting", "running", "exited"]
    container_id: Annotated[str, StringConstraints(max_length=128)] = ""
    exit_code: int | None = None


class Heartbeat(Strict):
    protocol_version: int = PROTOCOL_VERSION
    agent_version: Annotated[str, StringConstraints(max_length=64)] = ""
    resources: Resources
    running: list[RunningAttempt] = Field(default_factory=list, max_length=1024)


class Leaving(Strict):
    """The agent is stopping; these attempts' containers run on (or have exited) and its next start adopts them."""

    protocol_version: int = PROTOCOL_VERSION
    attempts: list[int] = Field(default_factory=list, max_length=1024)


class LeavingReply(Lenient):
    held: list[int] = Field(default_factory=list)  # the node's active attempts among those listed
    hold_seconds: float = 0.0  # lost after this long unless a heartbeat from the node comes back first


# Why a stop was asked (Command.reason), and the word the container reads in STOP_FILE (and EULER_STOP_REASON's
# description in docs/api.md). An unknown reason reads `stop`.
STOP_WORDS = {
    "cancelled": "cancel",
    "timeout": "timeout",
    "quota_exceeded": "budget",
    "reclaim": "reclaim",
    "preempt": "preempt",
    "node_draining": "drain",
    "window_closed": "window",
    "stale_attempt": "stale",
    "disk_limit": "disk_limit",
    "gpu_error": "gpu_error",
}
STOP_FILE = "/run/euler/stop"  # written in the container before SIGTERM: one word of STOP_WORDS and a newline
DEFAULT_STOP_GRACE_SECONDS = 30  # a stop's grace when neither the command nor the assignment says (older servers)
MAX_STOP_GRACE_SECONDS = 3600  # what any agent waits at most between SIGTERM and SIGKILL, whatever a server says
# Signals a job may ask for as its timeout warning (Assignment.warn_signal): the agent sends no other.
WARN_SIGNALS = frozenset({"SIGUSR1", "SIGUSR2", "SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGALRM", "SIGWINCH"})


def stop_word(reason: str) -> str:
    return STOP_WORDS.get(reason, "stop")


class Command(Lenient):
    type: Literal["stop_attempt"]
    attempt_id: int
    reason: str = ""  # a key of STOP_WORDS: cancelled | timeout | reclaim | preempt | quota_exceeded | ...
    # Seconds between SIGTERM and SIGKILL (None, older servers: the assignment's stop_grace_seconds).
    grace: int | None = Field(default=None, ge=0, le=MAX_STOP_GRACE_SECONDS)


class HeartbeatReply(Lenient):
    approval: Literal["pending", "approved", "rejected"]
    draining: bool = False
    heartbeat_interval: float
    commands: list[Command] = Field(default_factory=list)
    # The wait the agent's long-polls ask for from now on (seconds); absent from older servers: POLL_WAIT_SECONDS.
    poll_wait: float | None = None
    # Operators' GPU resets: GPU UUID -> a number that grows with each reset of it. The agent clears its mark on a
    # GPU once per new number (and marks it again if it still sees the fault); the server sends them every time.
    gpu_resets: dict[str, int] = Field(default_factory=dict)


# --- work -----------------------------------------------------------------------------------
ContainerPath = Annotated[str, StringConstraints(min_length=2, max_length=MAX_OUTPUT_PATH_CHARS, pattern=r"^/")]


class OutputSpec(Lenient):
    """What to collect when the container ends: absolute paths in the container (files or directories)."""

    paths: list[ContainerPath] = Field(default_factory=list, max_length=32)
    max_bytes: int = Field(ge=0)  # the job's cap on all its outputs together (never above the node's spool cap)


class InputFile(Lenient):
    """One file to place in the container before its command starts (created, not yet started: put_archive)."""

    output_id: int
    url: str  # absolute: the server's PATH_INPUT_FILE (send the node credential) or a presigned GET (send none)
    authenticated: bool = True
    sha256: Sha256Hex
    size: int = Field(ge=0)
    to: ContainerPath  # the file's full path in the container


class Assignment(Lenient):
    attempt_id: int
    job_id: int
    attempt_number: int
    image: str
    command: list[str]
    env: dict[str, str] = Field(default_factory=dict)  # only ever sent to platform nodes
    cpu_milli: int
    memory_bytes: int
    gpu_uuids: list[str] = Field(default_factory=list)
    timeout_seconds: int
    pids_limit: int = 512
    disk_bytes: int = 0  # writable layer and anything else the job writes on the node; 0: not limited
    # "default": the node's egress policy; "none" (and anything else, whatever a server sends): loopback only.
    network: Annotated[str, StringConstraints(max_length=16)] = "default"
    # The node's trust level: on a `community` node an image that this agent did not pull for a job is not run
    # (unless its lender allows local images). "" from older servers: not community.
    node_trust: Annotated[str, StringConstraints(max_length=16)] = ""
    outputs: OutputSpec | None = None  # None: the job declared no outputs
    inputs: list[InputFile] = Field(default_factory=list)
    # The job's checkpoint directory (issue 36, nodeagent/protocol_checkpoints.py); None: it declared none.
    checkpoint: CheckpointSpec | None = None
    # The runtime the server chose among those this node offered ("" from older servers: the engine's default),
    # and the isolation the job needs (its own, its node's trust level's): the agent checks both against what it
    # offers and its lender's minimum, and refuses the start rather than run weaker.
    runtime: Annotated[str, StringConstraints(max_length=63)] = ""
    isolation: Annotated[str, StringConstraints(max_length=16)] = ""
    # A task of a job array: its index (0..count-1) and the array's size. Not secret, unlike `env`: every node
    # sets them in the container as EULER_ARRAY_INDEX and EULER_ARRAY_COUNT. None: not an array task.
    array_index: int | None = Field(default=None, ge=0)
    array_count: int | None = Field(default=None, ge=1)
    # Every stop: SIGTERM, this many seconds, SIGKILL (a stop command's own grace wins). A timeout warning:
    # `warn_signal` (one of WARN_SIGNALS) sent this many seconds before the timeout; 0: none.
    stop_grace_seconds: int = Field(default=DEFAULT_STOP_GRACE_SECONDS, ge=0, le=MAX_STOP_GRACE_SECONDS)
    warn_before_timeout_seconds: int = Field(default=0, ge=0)
    warn_signal: Annotated[str, StringConstraints(max_length=10)] = "SIGUSR1"
    # A replica of a service (issue 38): the one container port the node path may reach. None: a batch job.
    service_port: int | None = Field(default=None, ge=1, le=65535)


class PollRequest(Strict):
    wait: float = Field(default=POLL_WAIT_SECONDS, ge=0, le=POLL_WAIT_MAX_SECONDS)


class PollReply(Lenient):
    assignments: list[Assignment] = Field(default_factory=list)
    commands: list[Command] = Field(default_factory=list)


# gpu_error: the agent stopped the container because a GPU it held turned unhealthy (a critical XID, an uncorrected
# ECC error); the message names the GPU and the fault. The server counts it as `lost` for `retry_on`.
# reclaimed, preempted: the agent stopped the container as asked by a `reclaim` or `preempt` stop (the server
# decides the outcome of an attempt it asked to stop from its own record: jobs/stopping.py). window_closed: stopped as
# asked at the end of the node's lender's availability window.
ExitReason = Literal[
    "exited", "oom", "timeout", "image_pull_failed", "start_failed", "cancelled", "lost", "disk_limit", "gpu_error",
    "reclaimed", "preempted", "quota_exceeded", "window_closed",
]  # fmt: skip


class AttemptReport(Strict):
    """Reported when the container starts (`running`) and when it ends (`ended`)."""

    state: Literal["running", "ended"]
    exit_code: int | None = None
    reason: ExitReason | None = None  # for `ended`: why; `exited` means a plain exit with exit_code
    message: Annotated[str, StringConstraints(max_length=2000)] = ""
    container_id: Annotated[str, StringConstraints(max_length=128)] = ""
    # For `ended`, when the job declared outputs: "complete" (every declared file stored), "truncated" (some kept,
    # the rest refused or over a cap: the reasons are in the manifest's `skipped`), "failed" (collection or upload
    # failed: `outputs_message` says why). "": no outputs declared.
    outputs: Literal["", "complete", "truncated", "failed"] = ""
    outputs_message: Annotated[str, StringConstraints(max_length=2000)] = ""
    # For `running`: the runtime the container was created with (its engine's name for it).
    runtime: Annotated[str, StringConstraints(max_length=63)] = ""
    # For `ended`: per GPU the attempt held, what the agent sampled while it ran ([]: no GPUs, or no NVML).
    gpu_stats: list[GpuStat] = Field(default_factory=list, max_length=64)


class ReportReply(Lenient):
    accepted: bool
    stop: bool = False  # true when the attempt is no longer current (fenced): stop its container


class LogChunk(Strict):
    seq: int = Field(ge=0)
    offset: int = Field(ge=0)  # byte offset of `data` in the attempt's combined stream
    stream: Literal["stdout", "stderr"]
    data: Annotated[str, StringConstraints(max_length=MAX_LOG_CHUNK_BYTES)]


class LogGap(Strict):
    """Output the server refused (a chunk answered 400 even alone), or that the agent never read (`bytes` 0:
    of unknown size, e.g. deleted by the engine log's rotation): stored as a marker line in its place.

    The attempt is flagged `log_truncated`, so nothing the agent read is ever dropped without a trace.
    """

    seq: int = Field(ge=0)
    offset: int = Field(ge=0)
    bytes: int = Field(ge=0)  # raw output bytes the refused chunk held; 0: output lost, of unknown size
    reason: Annotated[str, StringConstraints(max_length=200)] = ""  # e.g. "400 invalid_log_batch"


class LogBatch(Strict):
    chunks: list[LogChunk] = Field(default_factory=list, max_length=MAX_LOG_BATCH_CHUNKS)
    gaps: list[LogGap] = Field(default_factory=list, max_length=MAX_LOG_BATCH_CHUNKS)


class LogReply(Lenient):
    stored: int
    duplicates: int = 0
    last_seq: int | None = None
    capped: bool = False  # the attempt's log reached EULER_MAX_LOG_BYTES (marker stored): send no more
