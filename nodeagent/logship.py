"""Durable log shipping for one attempt: cut the container's output into chunks, spool them, ship in order.

Every chunk is written to the spool in the state dir before it is sent, so a retry (or a replay after
an agent restart) reuses the same `seq`, and the server's unique (attempt, seq) makes it idempotent.
`offset` counts bytes of the attempt's combined stdout/stderr stream as Docker stores it; after a
restart the reader feeds the container's log again from the start and the shipper skips what it
already spooled: no gap, no duplicate.

Batches are sized against `protocol.MAX_LOG_REQUEST_BYTES` as encoded on the wire. A batch the server
refuses as too large (413) or malformed (400) is split in halves and sent again; a single chunk still
refused is replaced by a gap (a marker line on the server, and `log_truncated`): never dropped silently.
When the server answers `capped` the attempt's log is full: the shipper drops what is left and takes no more.
"""

from __future__ import annotations

import itertools
import json
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

from nodeagent import protocol

CHUNK_BYTES = protocol.MAX_LOG_CHUNK_BYTES
FLUSH_SECONDS = 0.2
BATCH_CHUNKS = protocol.MAX_LOG_BATCH_CHUNKS
_EMPTY_BODY = len(protocol.encode_json({"chunks": [], "gaps": []}))
DEFAULT_SPOOL_BYTES = 64 * 1024 * 1024


class Stale(Exception):
    """The server refused the attempt (409): it is no longer current."""


def utf8_cut(buf: bytes | bytearray, limit: int) -> int:
    """The largest n ≤ limit such that buf[:n] does not end inside a UTF-8 sequence."""
    n = min(len(buf), limit)
    i = n
    while i > 0 and n - i < 3 and (buf[i - 1] & 0xC0) == 0x80:
        i -= 1
    if i > 0 and buf[i - 1] >= 0xC0:
        lead = buf[i - 1]
        need = 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4
        if n - (i - 1) < need:
            return i - 1 if i - 1 > 0 else n
    return n


def _text(raw: bytes) -> str:
    # PostgreSQL text cannot hold NUL; offsets stay byte-exact because `end` is kept beside the chunk.
    return raw.decode("utf-8", errors="replace").replace("\x00", "\ufffd")


class LogCursor:
    """Where a reader stopped in the engine's log: the last frame's timestamp and the bytes taken at it.

    A follow stream can end early (the engine ends it at each json-file rotation); the reader opens a new one
    `since` that timestamp (inclusive) and `take` drops what it already had, so a reconnect neither re-reads
    the whole log nor misaligns after a rotation dropped its oldest file.
    """

    def __init__(self) -> None:
        self.since: int | None = None
        self.at = 0
        self._resume: int | None = None
        self._skip = 0

    def reopen(self) -> None:
        self._resume, self._skip = self.since, self.at

    def take(self, ts: int | None, data: bytes) -> bytes:
        if ts is None:
            return data
        if self._resume is not None:
            if ts < self._resume:
                return b""
            if ts == self._resume:
                n = min(self._skip, len(data))
                self._skip -= n
                data = data[n:]
            else:
                self._resume = None
        if ts == self.since:
            self.at += len(data)
        else:
            self.since, self.at = ts, len(data)
        return data


class LogShipper:
    def __init__(
        self,
        *,
        attempt_id: int,
        spool_dir: Path,
        send: Callable[[list[dict]], dict],
        max_spool_bytes: int = DEFAULT_SPOOL_BYTES,
        flush_seconds: float = FLUSH_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.attempt_id = attempt_id
        self.send = send
        self.max_spool_bytes = max_spool_bytes
        self.flush_seconds = flush_seconds
        self.clock = clock
        spool_dir.mkdir(parents=True, exist_ok=True)
        self.spool_path = spool_dir / f"{attempt_id}.spool"
        self.ack_path = spool_dir / f"{attempt_id}.ack"
        self._lock = threading.Condition()
        self._queue: deque[dict] = deque()  # sealed, spooled, not acknowledged; in seq order
        self._spool_bytes = 0
        self._pending = bytearray()
        self._pending_stream = "stdout"
        self._last_seal = float("-inf")  # chunks go out at most every flush_seconds, the first one at once
        self._seen = 0  # bytes of the container's log fed so far (including skipped ones)
        self._next_retry = 0.0
        self._backoff = 0.0
        self.stale = False
        self.capped = False  # the server's cap is reached: nothing more is read or shipped
        self.refused_unrecorded = 0  # bytes whose gap notice was itself refused (logged; should never happen)
        self.wakeup = threading.Event()  # set when output arrives, so the shipping loop need not poll
        self.acked_seq, self.acked_end, self.capped = self._load_ack()
        self._load_spool()
        last = self._queue[-1] if self._queue else None
        self.next_seq = last["seq"] + 1 if last else self.acked_seq + 1
        self.resume_offset = last["end"] if last else self.acked_end  # fed bytes below this are already spooled

    # --- persistence ---------------------------------------------------------------------------
    def _load_ack(self) -> tuple[int, int, bool]:
        try:
            data = json.loads(self.ack_path.read_text())
            return int(data["seq"]), int(data["end"]), bool(data.get("capped"))
        except (OSError, ValueError, KeyError, TypeError):
            return -1, 0, False

    def _load_spool(self) -> None:
        try:
            lines = self.spool_path.read_text(encoding="utf-8").splitlines()
        except OSError:
            return
        expected = None
        for line in lines:
            try:
                chunk = json.loads(line)
            except ValueError:
                break  # a torn last line from a crash mid-write: everything after it is re-read from Docker
            if chunk["seq"] <= self.acked_seq or (expected is not None and chunk["seq"] != expected):
                continue
            self._queue.append(chunk)
            self._spool_bytes += chunk["end"] - chunk["offset"]
            expected = chunk["seq"] + 1

    def _write_ack(self) -> None:
        tmp = self.ack_path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"seq": self.acked_seq, "end": self.acked_end, "capped": self.capped}))
        os.replace(tmp, self.ack_path)

    def remove_files(self) -> None:
        for path in (self.spool_path, self.ack_path):
            path.unlink(missing_ok=True)

    # --- feeding (reader thread) -----------------------------------------------------------------
    def wait_for_room(self, stop: threading.Event) -> None:
        """Backpressure: while the spool is full the reader waits (Docker keeps the rest in its log)."""
        with self._lock:
            while self._spool_bytes >= self.max_spool_bytes and not (stop.is_set() or self.stale or self.capped):
                self._lock.wait(0.2)

    def feed(self, stream: str, data: bytes) -> None:
        with self._lock:
            if self.capped:
                return
            start, self._seen = self._seen, self._seen + len(data)
            taken = self.resume_offset + len(self._pending)  # bytes already spooled or waiting to be sealed
            if self._seen <= taken:
                return
            if start < taken:
                data = data[taken - start :]
            if self._pending and stream != self._pending_stream:
                self._seal(force=True)
            if not self._pending:
                self._pending_stream = stream
            self._pending += data
            while len(self._pending) >= CHUNK_BYTES:
                self._seal(force=False, limit=CHUNK_BYTES)
        self.wakeup.set()

    def due_in(self) -> float | None:
        """Seconds until waiting output may be sealed into a chunk (0: now), None when nothing waits."""
        with self._lock:
            if self._queue and self.clock() >= self._next_retry:
                return 0.0
            if not self._pending:
                return None
            return max(0.0, self._last_seal + self.flush_seconds - self.clock())

    def finish(self) -> None:
        """The container's output ended: seal what is left, even a torn UTF-8 sequence."""
        with self._lock:
            while self._pending:
                self._seal(force=True, limit=CHUNK_BYTES)

    def rewind(self) -> None:
        """The reader starts over from the first byte of the container's log; what was fed is skipped.

        Nothing is sealed here, so a UTF-8 sequence torn by the end of one read is completed by the next.
        """
        with self._lock:
            self._seen = 0

    def _seal(self, *, force: bool, limit: int = CHUNK_BYTES) -> None:
        n = min(len(self._pending), limit) if force else utf8_cut(self._pending, limit)
        if n == 0:
            return
        raw = bytes(self._pending[:n])
        del self._pending[:n]
        offset = self.resume_offset
        chunk = {"seq": self.next_seq, "offset": offset, "stream": self._pending_stream, "data": _text(raw)}
        chunk["end"] = offset + n
        with self.spool_path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(chunk, ensure_ascii=False) + "\n")
        self._queue.append(chunk)
        self._spool_bytes += n
        self.next_seq += 1
        self.resume_offset += n
        self._last_seal = self.clock()

    # --- shipping (run thread) -------------------------------------------------------------------
    @property
    def drained(self) -> bool:
        with self._lock:
            return not self._queue and not self._pending

    def ship(self, *, force: bool = False) -> bool:
        """Seal a chunk that waited long enough, then send what is spooled. True when nothing is left.

        Raises Stale when the server refuses the attempt; other failures are retried with backoff.
        """
        from nodeagent.client import Refused, Unreachable

        now = self.clock()
        with self._lock:
            if self._pending and now - self._last_seal >= self.flush_seconds:
                self._seal(force=False)
            if not force and now < self._next_retry:
                return False
        most = BATCH_CHUNKS
        while True:
            batch, body = self._next_batch(most)
            if not batch:
                return self.drained
            try:
                reply = self.send(body)
            except Unreachable:
                self._retry_later()
                return False
            except Refused as exc:
                if exc.status == 409:
                    self.stale = True
                    raise Stale(exc.code) from None
                if exc.status not in (400, 413):
                    self._retry_later()  # 401/403/429…: the server may take it later; nothing is dropped
                    return False
                if len(batch) > 1:
                    most = max(1, len(batch) // 2)  # too large or one bad chunk: halves, sent again
                    continue
                if "gap" not in batch[0]:
                    self._make_gap(f"{exc.status} {exc.code}")
                    continue
                # Even the gap notice was refused: nothing more can be recorded on the server.
                self.refused_unrecorded += batch[0]["end"] - batch[0]["offset"]
            self._backoff = 0.0
            self._acknowledge(batch, capped=bool(isinstance(reply, dict) and reply.get("capped")))
            if self.capped:
                return True

    def _next_batch(self, most: int) -> tuple[list[dict], dict]:
        """The oldest spooled chunks (at most `most`) whose encoded request fits MAX_LOG_REQUEST_BYTES."""
        with self._lock:
            queued = list(itertools.islice(self._queue, most))
        batch, chunks, gaps, size = [], [], [], _EMPTY_BODY
        for c in queued:
            if "gap" in c:
                wire = {"seq": c["seq"], "offset": c["offset"], "bytes": c["end"] - c["offset"], "reason": c["gap"]}
            else:
                wire = {k: c[k] for k in ("seq", "offset", "stream", "data")}
            grown = size + len(protocol.encode_json(wire)) + (1 if batch else 0)
            if batch and grown > protocol.MAX_LOG_REQUEST_BYTES:
                break
            size = grown
            batch.append(c)
            (gaps if "gap" in c else chunks).append(wire)
        body = {"chunks": chunks}
        if gaps:
            body["gaps"] = gaps
        return batch, body

    def _make_gap(self, reason: str) -> None:
        """The first queued chunk is refused even alone: it becomes a gap (marker + log_truncated on the server)."""
        with self._lock:
            c = self._queue[0]
            self._queue[0] = {"seq": c["seq"], "offset": c["offset"], "end": c["end"], "gap": reason[:200]}

    def _retry_later(self) -> None:
        self._backoff = min(max(self._backoff * 2, 0.2), 3.0)
        self._next_retry = self.clock() + self._backoff

    def _acknowledge(self, batch: list[dict], *, capped: bool) -> None:
        with self._lock:
            for _ in batch:
                done = self._queue.popleft()
                self._spool_bytes -= done["end"] - done["offset"]
            self.acked_seq, self.acked_end = batch[-1]["seq"], batch[-1]["end"]
            if capped:
                # Past the cap the server stores nothing more and has recorded the truncation: stop here.
                self.capped = True
                self._queue.clear()
                self._pending.clear()
                self._spool_bytes = 0
            self._write_ack()
            if not self._queue:
                self.spool_path.write_text("")
            self._lock.notify_all()
        if capped:
            self.wakeup.set()
