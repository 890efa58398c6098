"""Checkpoints that follow the job (issue 36), the agent's part: read the job's checkpoint directory from its
container, send what the control plane does not hold yet, commit it as one set; and place the latest committed
one in a new attempt's container before it starts.

Reading: the engine's archive of the directory (`GET /containers/{id}/archive`, what `docker cp` uses; it works on
a running and on a stopped container), parsed as it streams. Only regular files are kept, into the attempt's
spool under numbered names, hashed as written; links are never followed (a job's link to `/etc` or the host stays
a link, not kept), devices and the like are counted as skipped. The shared limits (nodeagent/protocol_checkpoints.py)
stop the read at once: a directory of 100,000 files or past MAX_CHECKPOINT_BYTES is refused whole, and the refusal
is posted so that the control plane records it on the job. At a stop the read has STOP_CHECKPOINT_SECONDS at most.

Entry points: `upload_checkpoint(run, cid, reason)` (the stop path calls it after the container has stopped),
`Periodic` (a thread per running attempt, every `interval_seconds`), `restore(run, cid)` (before the start).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import posixpath
import tarfile
import threading
import time
from dataclasses import dataclass, field

from docker import errors as derrors

from nodeagent import protocol
from nodeagent import protocol_checkpoints as pc
from nodeagent.backoff import Backoff
from nodeagent.client import Refused, Unreachable
from nodeagent.docker_runner import RunnerError
from nodeagent.logship import Stale
from nodeagent.outputs import rules
from nodeagent.outputs.collect import COPY_BYTES, BoundedStream, ReadLimit, _data
from nodeagent.outputs.spool import AttemptSpool
from nodeagent.outputs.upload import FileFailed, Interrupted, Uploader

PERIODIC_READ_SECONDS = 600.0
STOP_UPLOAD_GIVE_UP = 60.0  # at a stop: no progress for this long and the checkpoint is given up (the stop goes on)
RESTORE_TRIES = 5  # a restore that cannot reach the control plane this often fails the start (`start_failed`)
READ_SLACK_BYTES = 64 * 1024 * 1024  # tar headers read past the byte limit before the read is cut


class CheckpointRefused(Exception):
    """The directory is over a limit: the whole checkpoint is refused (the reason goes to the control plane)."""


@dataclass
class Collected:
    files: list[protocol.CheckpointFile] = field(default_factory=list)
    spool_names: dict[str, str] = field(default_factory=dict)  # relative path → spool name
    skipped: int = 0
    total: int = 0


# --- reading the directory -------------------------------------------------------------------------------------
def collect_dir(api, cid: str, path: str, spool: AttemptSpool, *, seconds: float) -> Collected:
    """The directory's regular files into `spool`; CheckpointRefused past a limit. A missing directory is an empty
    checkpoint (the job has not written one yet)."""
    base = rules.declared_base(path)
    got = Collected()
    try:
        res = api._get(api._url("/containers/{0}/archive", cid), params={"path": path},
                       headers={"Accept-Encoding": "identity"}, stream=True)  # fmt: skip
        api._raise_for_status(res)
    except derrors.NotFound:
        return got
    if res.headers.get("Content-Encoding", "identity") != "identity":
        res.close()
        raise CheckpointRefused("the engine sent the archive encoded")
    stream = BoundedStream(res.raw, budget=pc.MAX_CHECKPOINT_BYTES + READ_SLACK_BYTES,
                           deadline=time.monotonic() + seconds)  # fmt: skip
    try:
        with tarfile.open(fileobj=stream, mode="r|", bufsize=COPY_BYTES, encoding="utf-8",
                          errors="surrogateescape") as tar:  # fmt: skip
            while (member := tar.next()) is not None:
                tar.members.clear()  # stream mode keeps every header it read
                _member(tar, member, base, spool, got)
    except ReadLimit as exc:
        raise CheckpointRefused(f"reading the directory was cut: {exc}") from None
    finally:
        with contextlib.suppress(Exception):
            res.close()
    return got


def _member(tar, member, base: str, spool: AttemptSpool, got: Collected) -> None:
    kind = rules.member_kind(member)
    if kind == "dir":
        return
    if kind != "file":
        got.skipped += 1  # a link is never followed, a device never read
        return
    try:
        name = rules.relative_name(member.name, base)
    except rules.BadName:
        got.skipped += 1
        return
    rel = name.split("/", 1)[1] if "/" in name else name  # relative to the directory (a file path: its own name)
    if len(got.files) >= pc.MAX_CHECKPOINT_FILES:
        raise CheckpointRefused(f"more than {pc.MAX_CHECKPOINT_FILES} files")
    if got.total + member.size > pc.MAX_CHECKPOINT_BYTES:
        raise CheckpointRefused(f"more than {pc.MAX_CHECKPOINT_BYTES} bytes")
    if not spool.reserve(member.size):
        raise CheckpointRefused("the node's spool is full (EULER_NODE_OUTPUT_SPOOL_BYTES)")
    spool_name, fd = spool.new_file()
    digest, written = hashlib.sha256(), 0
    try:
        with os.fdopen(fd, "wb") as out:
            for chunk in _data(tar, member):
                out.write(chunk)
                digest.update(chunk)
                written += len(chunk)
    except BaseException:
        spool.discard(spool_name)
        raise
    if written != member.size:
        spool.discard(spool_name)
        raise tarfile.ReadError(f"{rules.printable(rel)}: the archive ended after {written} of {member.size} bytes")
    got.files.append(protocol.CheckpointFile(path=rel, size=written, sha256=digest.hexdigest()))
    got.spool_names[rel] = spool_name
    got.total += written


# --- sending it --------------------------------------------------------------------------------------------------
class BlobUploader(Uploader):
    """The outputs' uploader (chunks, presigned PUT, resume, backoff), sending a checkpoint's blobs."""

    def _file_path(self, upload) -> str:
        return pc.PATH_ATTEMPT_CHECKPOINT_BLOB.format(attempt_id=self.attempt_id, blob_id=upload.blob_id)

    def _done_path(self, upload) -> str:
        return pc.PATH_ATTEMPT_CHECKPOINT_BLOB_DONE.format(attempt_id=self.attempt_id, blob_id=upload.blob_id)

    def post(self, path: str, body: dict) -> dict:
        return self._retry(lambda: self.client.call("POST", path, body))


def send(uploader: BlobUploader, got: Collected, reason: str, *, may_commit=lambda: True) -> str:
    """Manifest, blobs, commit; what happened, in words. FileFailed when the control plane refused or failed."""
    manifest = protocol.CheckpointManifest(reason=reason, files=got.files, skipped=got.skipped)
    path = pc.PATH_ATTEMPT_CHECKPOINTS.format(attempt_id=uploader.attempt_id)
    plan = protocol.CheckpointPlan.model_validate(uploader.post(path, manifest.model_dump()))
    by_sha = {f.sha256: got.spool_names[f.path] for f in got.files}
    sent = 0
    for upload in plan.uploads:
        name = by_sha.get(upload.sha256)
        if name is None:
            raise FileFailed("the plan names a blob the manifest did not list")
        if upload.method == "put":
            uploader._put(upload, name, upload.size)
        else:
            uploader._chunks(upload, name, upload.size)
        sent += upload.size
    if not may_commit():
        return f"checkpoint {plan.seq} not committed: a later one is being taken"
    commit = pc.PATH_ATTEMPT_CHECKPOINT_COMMIT.format(attempt_id=uploader.attempt_id, checkpoint_id=plan.checkpoint_id)
    protocol.CheckpointCommitted.model_validate(uploader.post(commit, {}))
    return f"checkpoint {plan.seq} committed: {len(got.files)} files, {got.total} bytes, {sent} bytes sent"


def refuse(uploader: BlobUploader, reason: str, why: str) -> None:
    """Tell the control plane why this checkpoint is not taken (it records it on the job: 422 is the answer)."""
    manifest = protocol.CheckpointManifest(reason=reason, refused=why[:500])
    with contextlib.suppress(FileFailed):
        uploader.post(pc.PATH_ATTEMPT_CHECKPOINTS.format(attempt_id=uploader.attempt_id), manifest.model_dump())


# --- the attempt's side ------------------------------------------------------------------------------------------
def declared(run) -> protocol.CheckpointSpec | None:
    """The attempt's CheckpointSpec: from its assignment, or after an agent restart from its record."""
    if run.assignment is not None:
        return run.assignment.checkpoint
    raw = run.record.get("checkpoint")
    return protocol.CheckpointSpec.model_validate(raw) if raw else None


def remember(run) -> None:
    """Keep the CheckpointSpec in the attempt's record, so that a restarted agent still checkpoints."""
    spec = run.assignment.checkpoint
    run.record["checkpoint"] = spec.model_dump() if spec is not None else None


def _state(run) -> _AttemptCheckpoints:
    """Per attempt: one checkpoint at a time, and once the stop's began no periodic one commits after it."""
    holder = run.__dict__.setdefault("_checkpoints", None)
    if holder is None:
        holder = run.__dict__["_checkpoints"] = _AttemptCheckpoints()
    return holder


class _AttemptCheckpoints:
    def __init__(self):
        self.lock = threading.Lock()  # one checkpoint at a time
        self.stopped = threading.Event()  # the stop's checkpoint began: periodic ones end
        self.periodic: Periodic | None = None


def upload_checkpoint(run, cid: str, reason: str) -> str:
    """Take one checkpoint of the attempt's directory now (`stop`: the container has stopped, its files are final).

    Never raises but Stale (the attempt was fenced) and Interrupted (the agent closes); returns what happened."""
    spec = declared(run)
    if spec is None:
        return ""
    state = _state(run)
    at_stop = reason == "stop"
    if at_stop:
        state.stopped.set()
        if state.periodic is not None:
            state.periodic.halt()
    with state.lock:
        if not at_stop and state.stopped.is_set():
            return "the stop's checkpoint is taken instead"
        spool = run.ex.outputs.attempt(run.attempt_id, part="ckpt")
        closing = run.ex.closing if at_stop else _Either(run.ex.closing, state.stopped)
        uploader = BlobUploader(run.ex.client, run.attempt_id, spool, closing=closing,
                                give_up_seconds=STOP_UPLOAD_GIVE_UP if at_stop else 300.0)  # fmt: skip
        seconds = pc.STOP_CHECKPOINT_SECONDS if at_stop else PERIODIC_READ_SECONDS
        try:
            spool.open()
            try:
                got = collect_dir(run.ex.runner.client.api, cid, spec.path, spool, seconds=seconds)
            except CheckpointRefused as exc:
                refuse(uploader, reason, str(exc))
                outcome = f"checkpoint refused: {exc}"
            else:
                if got.files:
                    outcome = send(uploader, got, reason, may_commit=lambda: at_stop or not state.stopped.is_set())
                else:  # nothing written yet: an empty checkpoint would only push a real one out of `keep_last`
                    outcome = "nothing to checkpoint (no regular file in the directory)"
        except Stale:
            raise
        except Interrupted:
            if at_stop or run.ex.closing.is_set():
                raise
            outcome = "checkpoint interrupted by the stop"
        except FileFailed as exc:
            outcome = f"checkpoint failed: {exc}"
        except Exception as exc:  # noqa: BLE001 - the engine, the disk, the reply: the attempt goes on
            run.ex.log.exception("attempt %s: checkpoint failed", run.attempt_id)
            outcome = f"checkpoint failed: {exc}"
        finally:
            spool.remove()
    run.ex.log.info("attempt %s %s checkpoint: %s", run.attempt_id, reason, outcome)
    return outcome


class _Either:
    """`is_set`/`wait` over two events (the uploader's `closing`): the agent closes, or the stop's checkpoint began."""

    def __init__(self, a: threading.Event, b: threading.Event):
        self.a, self.b = a, b

    def is_set(self) -> bool:
        return self.a.is_set() or self.b.is_set()

    def wait(self, timeout: float) -> bool:
        end = time.monotonic() + timeout
        while not self.is_set():
            left = end - time.monotonic()
            if left <= 0:
                return False
            self.b.wait(min(left, 0.5))
        return True


class Periodic:
    """A running attempt's checkpoints every `interval_seconds`, in a thread of its own, until it ends."""

    def __init__(self, run, cid: str, interval: float):
        self.run, self.cid, self.interval = run, cid, interval
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True, name=f"euler-ckpt-{run.attempt_id}")

    def start(self) -> Periodic:
        self.thread.start()
        return self

    def halt(self) -> None:
        self.done.set()

    def _loop(self) -> None:
        """Start to start: a checkpoint begins every `interval` seconds after the last one began (at once when the
        last took longer), so the steps a lost node costs stay within one interval plus one upload's time, not
        interval plus upload time for every checkpoint since the start."""
        run = self.run
        due = time.monotonic() + self.interval
        while not self.done.wait(max(0.0, due - time.monotonic())):
            if run.exited.is_set() or run.ex.closing.is_set():
                return
            due = time.monotonic() + self.interval
            try:
                upload_checkpoint(run, self.cid, "periodic")
            except (Stale, Interrupted):
                return


def start_periodic(run, cid: str) -> None:
    """From the attempt's `_after_start` hook: periodic checkpoints while it runs (fresh or adopted)."""
    spec = declared(run)
    if spec is None:
        return
    state = _state(run)
    if state.periodic is None:
        state.periodic = Periodic(run, cid, spec.interval_seconds).start()


def stop_periodic(run) -> None:
    state = run.__dict__.get("_checkpoints")
    if state is not None and state.periodic is not None:
        state.periodic.halt()


# --- restoring ---------------------------------------------------------------------------------------------------
def _header(name: str, *, size: int = 0, directory: bool = False) -> bytes:
    info = tarfile.TarInfo(name + ("/" if directory else ""))
    info.type = tarfile.DIRTYPE if directory else tarfile.REGTYPE
    # Writable by whatever user the job runs as (the files are the job's own, in its own container).
    info.size, info.mode, info.mtime = (0 if directory else size), (0o777 if directory else 0o666), int(time.time())
    return info.tobuf(format=tarfile.PAX_FORMAT)


def restore(run, cid: str) -> str:
    """Before the start: the latest committed checkpoint at the job's path, as one archive put into the created
    container. RunnerError `start_failed` when it cannot be placed (the attempt is retried, never run without it)."""
    spec = declared(run)
    if spec is None or spec.restore_id is None:
        return ""
    spool = run.ex.outputs.attempt(run.attempt_id, part="restore")
    backoff = Backoff(base=0.5, cap=5.0)
    try:
        for tries_left in range(RESTORE_TRIES - 1, -1, -1):
            spool.open()  # afresh on each try
            try:
                path = pc.PATH_ATTEMPT_CHECKPOINT_RESTORE.format(attempt_id=run.attempt_id)
                plan = protocol.CheckpointRestore.model_validate(run.ex.client.call("GET", path))
                name = _restore_tar(run.ex.client, spec.path, plan, spool)
                break
            except Unreachable:
                if not tries_left or run.ex.closing.wait(backoff.next_delay()):
                    raise
        with os.fdopen(spool.open_read(name), "rb") as fh:
            if not run.ex.runner.client.api.put_archive(cid, "/", fh):
                raise RunnerError("start_failed", "restoring the checkpoint: the engine refused the archive")
    except RunnerError:
        raise
    except (Refused, Unreachable, ValueError, OSError, RestoreFailed) as exc:
        raise RunnerError("start_failed", f"restoring checkpoint {spec.restore_id} failed: {exc}"[:2000]) from None
    finally:
        spool.remove()
    message = f"checkpoint {plan.seq} restored: {len(plan.files)} files"
    run.ex.log.info("attempt %s: %s", run.attempt_id, message)
    return message


class RestoreFailed(Exception):
    pass


def _restore_tar(client, path: str, plan: protocol.CheckpointRestore, spool: AttemptSpool) -> str:
    root = posixpath.normpath(path).strip("/")
    total = sum(f.size for f in plan.files)
    if not spool.reserve(total):
        raise RestoreFailed(f"{total} bytes do not fit in the node's spool (EULER_NODE_OUTPUT_SPOOL_BYTES)")
    name, fd = spool.new_file()
    with os.fdopen(fd, "wb") as out:
        parts = root.split("/")
        for i in range(1, len(parts) + 1):
            out.write(_header("/".join(parts[:i]), directory=True))
        made = set()
        for f in plan.files:
            rel = rules.relative_name(f"{parts[-1]}/{f.path}", parts[-1])  # the same check as a collected name
            dirs = rel.split("/")[1:-1]
            for i in range(1, len(dirs) + 1):
                sub = f"{root}/{'/'.join(dirs[:i])}"
                if sub not in made:
                    made.add(sub)
                    out.write(_header(sub, directory=True))
            out.write(_header(f"{root}/{rel.split('/', 1)[1]}", size=f.size))
            digest, got = hashlib.sha256(), 0
            if f.size:
                with client.download(f.url, authenticated=f.authenticated) as response:
                    for chunk in response.iter_bytes(COPY_BYTES):
                        got += len(chunk)
                        if got > f.size:
                            raise RestoreFailed(f"{rules.printable(f.path)}: more than {f.size} bytes")
                        digest.update(chunk)
                        out.write(chunk)
            if got != f.size or digest.hexdigest() != f.sha256:
                raise RestoreFailed(f"{rules.printable(f.path)}: not the bytes the checkpoint names")
            out.write(b"\0" * (-f.size % tarfile.BLOCKSIZE))
        out.write(b"\0" * (2 * tarfile.BLOCKSIZE))
    return name
