"""Collect a stopped container's declared paths into the attempt's spool, from the engine's tar stream.

The engine archives each path (`GET /containers/{id}/archive`, what `docker cp` uses): nothing of the host is
mounted or read. The stream is parsed here as it arrives (tarfile in stream mode) and only regular files are
written, under numbered names in the spool, hashed as they are written. Links are never followed; what is not
kept is listed in the manifest's `skipped` with its reason. The bytes and the time read from the engine are
bounded, so a huge tree or a tar bomb ends the read instead of holding the attempt.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import queue
import tarfile
import threading
import time
from dataclasses import dataclass, field

from docker import errors as derrors

from nodeagent import protocol
from nodeagent.outputs import rules
from nodeagent.outputs.spool import AttemptSpool

READ_SLACK_BYTES = 64 * 1024 * 1024  # tar headers and skipped entries read past the job's cap before giving up
COLLECT_SECONDS = 900.0
COPY_BYTES = 1024 * 1024
PIPELINE_BYTES = 4 * COPY_BYTES  # files larger than this are written by a thread of their own
PIPELINE_BLOCKS = 8


class ReadLimit(Exception):
    """The engine's stream went past the bytes or the time one collection may read."""


class BoundedStream:
    """A file-like view of the engine's archive response that stops at a byte budget and a deadline."""

    def __init__(self, raw, *, budget: int, deadline: float):
        self.raw = raw
        self.budget = budget
        self.deadline = deadline
        self.read_bytes = 0

    def read(self, n: int = -1) -> bytes:
        if time.monotonic() > self.deadline:
            raise ReadLimit("took longer than the collection may")
        left = self.budget - self.read_bytes
        if left <= 0:
            raise ReadLimit(f"read {self.read_bytes} bytes from the engine")
        data = self.raw.read(min(n, left) if n is not None and n >= 0 else left)
        self.read_bytes += len(data)
        return data


@dataclass
class Collected:
    """A collection's manifest, and the spool name of each kept file (manifest order)."""

    manifest: protocol.OutputManifest
    spool_names: dict[str, str] = field(default_factory=dict)  # relative path → spool file name


def collect(
    api, container_id: str, spec: protocol.OutputSpec, spool: AttemptSpool, *, seconds: float = COLLECT_SECONDS
) -> Collected:
    """Every declared path of the (stopped) container into `spool`, within the job's cap and the spool's."""
    tally = rules.Tally(job_cap=spec.max_bytes)
    names: dict[str, str] = {}
    deadline = time.monotonic() + seconds
    spool.open()
    try:
        for path in spec.paths:
            _collect_path(api, container_id, path, spool, tally, names, deadline)
    except Exception as exc:  # noqa: BLE001 - the engine, its stream or the disk: the manifest says why
        spool.remove()
        return Collected(tally.manifest(error=f"collecting the outputs failed: {exc}"))
    return Collected(tally.manifest(), names)


def _collect_path(api, cid, path, spool, tally, names, deadline) -> None:
    try:
        base = rules.declared_base(path)
    except rules.BadName as exc:
        tally.skip(path, exc.reason, exc.message)
        return
    try:
        # Plain tar, never gzip: the bounds below count the bytes tarfile parses, not what they inflate from.
        res = api._get(
            api._url("/containers/{0}/archive", cid),
            params={"path": path},
            headers={"Accept-Encoding": "identity"},
            stream=True,
        )
        api._raise_for_status(res)
    except derrors.NotFound:
        tally.skip(path, rules.MISSING, "no such file or directory in the container")
        return
    if res.headers.get("Content-Encoding", "identity") != "identity":
        res.close()
        raise tarfile.ReadError(f"the engine sent the archive {res.headers['Content-Encoding']}-encoded")
    budget = max(0, tally.job_cap - tally.kept_bytes) + READ_SLACK_BYTES
    stream = BoundedStream(res.raw, budget=budget, deadline=deadline)
    try:
        # Large reads: tarfile's default (10 KiB) makes the engine's chunked stream cost more than the copy.
        tar_args = {"mode": "r|", "bufsize": COPY_BYTES, "encoding": "utf-8", "errors": "surrogateescape"}
        with tarfile.open(fileobj=stream, **tar_args) as tar:
            while True:
                member = tar.next()
                if member is None:
                    break
                tar.members.clear()  # stream mode keeps every header it read: a million would fill memory
                if not _member(tar, member, base, spool, tally, names, stream):
                    tally.skip(
                        path, tally.skipped[-1].reason if tally.skipped else rules.JOB_CAP, _STOPPED, listed=True
                    )
                    break
    except ReadLimit as exc:
        last = tally.skipped[-1].reason if tally.skipped else rules.JOB_CAP
        tally.skip(path, last, f"{_STOPPED}: {exc}", listed=True)
    finally:
        with contextlib.suppress(Exception):
            res.close()


_STOPPED = "the rest of this path was not read (past the job's cap, the file count or the time allowed)"


def _member(tar, member, base, spool: AttemptSpool, tally: rules.Tally, names, stream: BoundedStream) -> bool:
    """Keep or skip one member; False when reading on would be pointless (a skipped file larger than the budget)."""
    kind = rules.member_kind(member)
    if kind == "dir":
        return True
    try:
        name = rules.relative_name(member.name, base)
    except rules.BadName as exc:
        tally.skip(member.name, exc.reason, exc.message)
        return _can_read_past(member, stream)
    if kind != "file":
        message = rules.SKIP_MESSAGES[kind]
        if kind in (rules.SYMLINK, "hardlink") and member.linkname:
            message += f" (to {rules.printable(member.linkname)[:200]})"
        tally.skip(name, rules.SYMLINK if kind == "hardlink" else kind, message)
        return True
    if name in names:
        tally.skip(name, rules.BAD_NAME, "another declared path already gave a file of this name")
        return _can_read_past(member, stream)
    refused = tally.refuse_file(member.size)
    if refused is None and not spool.reserve(member.size):
        refused = rules.SPOOL_CAP, "the node's output spool is full (EULER_NODE_OUTPUT_SPOOL_BYTES)"
    if refused is not None:
        tally.skip(name, *refused)
        return _can_read_past(member, stream)
    spool_name, fd = spool.new_file()
    digest, written = hashlib.sha256(), 0
    try:
        with _Writer(fd, threaded=member.size > PIPELINE_BYTES) as out:
            for chunk in _data(tar, member):
                out.write(chunk)  # the disk write overlaps the hash and the next read
                digest.update(chunk)
                written += len(chunk)
    except BaseException:
        spool.discard(spool_name)
        spool.unreserve(member.size)
        raise
    if written != member.size:  # a short archive: the engine's stream ended early
        spool.discard(spool_name)
        spool.unreserve(member.size)
        raise tarfile.ReadError(f"{rules.printable(name)}: the archive ended after {written} of {member.size} bytes")
    tally.keep(name, written, digest.hexdigest())
    names[name] = spool_name
    return True


class _Writer:
    """A spool file written by a thread of its own for large files (the disk, the hash and the engine's stream
    then overlap: each lets go of the GIL), or inline for small ones. A write error surfaces on the next write."""

    def __init__(self, fd: int, *, threaded: bool):
        self.out = os.fdopen(fd, "wb")
        self.queue: queue.Queue | None = queue.Queue(maxsize=PIPELINE_BLOCKS) if threaded else None
        self.error: BaseException | None = None
        if self.queue is not None:
            self.thread = threading.Thread(target=self._drain, daemon=True, name="euler-outputs-writer")
            self.thread.start()

    def _drain(self) -> None:
        while (chunk := self.queue.get()) is not None:
            if self.error is None:
                try:
                    self.out.write(chunk)
                except BaseException as exc:  # noqa: BLE001 - handed to the reading thread
                    self.error = exc

    def write(self, chunk: bytes) -> None:
        if self.queue is None:
            self.out.write(chunk)
            return
        if self.error is not None:
            raise self.error
        self.queue.put(chunk)

    def __enter__(self) -> _Writer:
        return self

    def __exit__(self, *exc) -> None:
        if self.queue is not None:
            self.queue.put(None)
            self.thread.join()
        self.out.close()
        if self.error is not None and exc[0] is None:
            raise self.error


def _data(tar: tarfile.TarFile, member: tarfile.TarInfo):
    """A member's bytes in blocks. Straight from the stream, which stands at its data after `next()` (the
    extractfile layers cost more than the copy); a sparse member through extractfile, which knows its map."""
    if member.issparse():
        source = tar.extractfile(member)
        while chunk := source.read(COPY_BYTES):
            yield chunk
        return
    left = member.size
    while left > 0:
        chunk = tar.fileobj.read(min(COPY_BYTES, left))
        if not chunk:
            return
        left -= len(chunk)
        yield chunk


def _can_read_past(member: tarfile.TarInfo, stream: BoundedStream) -> bool:
    """Whether skipping this member's data stays within what may be read (else stop at once: a tar bomb)."""
    return member.size <= stream.budget - stream.read_bytes
