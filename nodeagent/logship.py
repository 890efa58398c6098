"""Durable log shipping for one attempt: cut the container's output into chunks, spool them, ship in order.

Every chunk is written to the spool in the state dir before it is sent, so a retry (or a replay after
an agent restart) reuses the same `seq`, and the server's unique (attempt, seq) makes it idempotent.
`offset` counts bytes of the attempt's combined stdout/stderr stream as the agent read it. Each chunk also
keeps, per stream, how many bytes of the engine's copy (json-file: invalid UTF-8 stored as U+FFFD) it
ends at: after a restart the reader feeds the engine's log again from the start (`rewind`) and the shipper
skips, stream by stream, what it already spooled: no gap, no duplicate, whatever order the engine
interleaved the two streams in. When the engine no longer holds the start of the log, the reader records a
gap (`record_gap`: a marker line on the server and `log_truncated`) instead of skipping by a count that no
longer lines up.

Batches are sized against `protocol.MAX_LOG_REQUEST_BYTES` as encoded on the wire. A batch the server
refuses as too large (413) or malformed (400) is split in halves and sent again; a single chunk still
refused is replaced by a gap (a marker line on the server, and `log_truncated`): never dropped silently.
When the server answers `capped` the attempt's log is full: the shipper drops what is left and takes no more.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

from nodeagent import protocol
from nodeagent.enginelog import STREAMS, EngineCount
from nodeagent.logbatch import as_gap, chunk_text, utf8_cut, wire_batch

log = logging.getLogger("euler.nodeagent.executor")
CHUNK_BYTES = protocol.MAX_LOG_CHUNK_BYTES
FLUSH_SECONDS = 0.2
BATCH_CHUNKS = protocol.MAX_LOG_BATCH_CHUNKS
DEFAULT_SPOOL_BYTES = 64 * 1024 * 1024


class Stale(Exception):
    """The server refused the attempt (409): it is no longer current."""


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
        self._replaying = False  # `rewind`: the feed is the engine's log again from its first byte
        self._seen = dict.fromkeys(STREAMS, 0)  # while replaying: engine bytes fed per stream, skipped ones too
        self._fed_at = 0  # wall-clock ns of the last feed: when the spooled bytes were read (see resume_read_at)
        self._next_retry = 0.0
        self._backoff = 0.0
        self.stale = False
        self.capped = False  # the server's cap is reached: nothing more is read or shipped
        self.wakeup = threading.Event()  # set when output arrives, so the shipping loop need not poll
        self.acked_seq, self.acked_end, self.capped, ack = self._load_ack()
        self._load_spool()
        last = self._queue[-1] if self._queue else ack
        self.next_seq = last["seq"] + 1 if self._queue else self.acked_seq + 1
        self.resume_offset = last["end"] if self._queue else self.acked_end  # fed bytes below this are spooled
        # Per stream, the engine bytes spooled, and when they were read (wall-clock ns); from the last chunk or
        # the acknowledgement. resume_ends is None for a spool written before they were kept.
        ends = (last or {}).get("ends")
        nothing = self.resume_offset == 0 and not self._queue
        self.resume_ends: dict[str, int] | None = (
            dict(zip(STREAMS, map(int, ends), strict=True)) if ends else dict.fromkeys(STREAMS, 0) if nothing else None
        )
        self.resume_read_at: int | None = (last or {}).get("read_at")
        self._acked_position = {k: ack[k] for k in ("ends", "read_at") if ack and k in ack}
        self._sealed = dict(self.resume_ends or dict.fromkeys(STREAMS, 0))  # engine bytes per stream, sealed
        self._taken = dict(self._sealed)  # … sealed or pending
        self._count_taken = {k: EngineCount() for k in STREAMS}
        self._count_sealed = {k: EngineCount() for k in STREAMS}

    # --- persistence ---------------------------------------------------------------------------
    def _load_ack(self) -> tuple[int, int, bool, dict | None]:
        try:
            data = json.loads(self.ack_path.read_text())
            return int(data["seq"]), int(data["end"]), bool(data.get("capped")), data
        except (OSError, ValueError, KeyError, TypeError):
            return -1, 0, False, None

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
        ack = {"seq": self.acked_seq, "end": self.acked_end, "capped": self.capped}
        ack.update(self._acked_position)
        tmp.write_text(json.dumps(ack))
        os.replace(tmp, self.ack_path)

    def remove_files(self) -> None:
        for path in (self.spool_path, self.ack_path):
            path.unlink(missing_ok=True)

    # --- feeding (reader thread) -----------------------------------------------------------------
    def wait_for_room(self, *stops: threading.Event) -> None:
        """Backpressure: while the spool is full the reader waits, until one of `stops` is set.

        An attached reader that waits holds the job's writes (the engine blocks them): output is slowed, not lost.
        The engine cannot end such a container either (even a kill waits for its output to be read), so a stop
        must be one of `stops`.
        """
        with self._lock:
            while self._spool_bytes >= self.max_spool_bytes and not (
                self.stale or self.capped or any(s.is_set() for s in stops)
            ):
                self._lock.wait(0.2)

    def spool_full(self, factor: float = 1) -> bool:
        with self._lock:
            return self._spool_bytes >= self.max_spool_bytes * factor

    def feed(self, stream: str, data: bytes, *, read_at: int | None = None) -> None:
        """New output of `stream`. While replaying (after `rewind`), what this stream already spooled is skipped.

        `read_at`: when the output was written, in wall-clock ns (the engine's stamp); default now (attached).
        """
        with self._lock:
            if self.capped:
                return
            self._fed_at = read_at or time.time_ns()
            if self._replaying:
                start = self._seen[stream]
                self._seen[stream] += len(data)
                taken = self._taken[stream]
                if self._seen[stream] <= taken:
                    return
                if start < taken:
                    data = data[taken - start :]
            if self._pending and stream != self._pending_stream:
                self._seal(force=True)
            if not self._pending:
                self._pending_stream = stream
            self._pending += data
            # The engine's copy is valid UTF-8 frame by frame: its count is its length. Raw output (attached) is
            # counted as the engine stores it.
            self._taken[stream] += len(data) if self._replaying else self._count_taken[stream].add(data)
            while len(self._pending) >= CHUNK_BYTES:
                self._seal(force=False, limit=CHUNK_BYTES)
        self.wakeup.set()

    def record_gap(self, reason: str) -> None:
        """Output the engine deleted before the agent read it: a gap here (a marker and `log_truncated` on the
        server), and from now on every fed byte counts as new (the replay can no longer skip by count)."""
        with self._lock:
            if self.capped:
                return
            while self._pending:
                self._seal(force=True)
            offset = self.resume_offset
            gap = {"seq": self.next_seq, "offset": offset, "end": offset, "gap": reason[:200]}
            gap.update(self._position())
            with self.spool_path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(gap) + "\n")
            self._queue.append(gap)
            self.next_seq += 1
            self._replaying = False
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
            self._replaying = True
            self._seen = dict.fromkeys(STREAMS, 0)

    def _seal(self, *, force: bool, limit: int = CHUNK_BYTES) -> None:
        n = min(len(self._pending), limit) if force else utf8_cut(self._pending, limit)
        if n == 0:
            return
        raw = bytes(self._pending[:n])
        del self._pending[:n]
        offset = self.resume_offset
        chunk = {"seq": self.next_seq, "offset": offset, "stream": self._pending_stream, "data": chunk_text(raw)}
        chunk["end"] = offset + n
        self._sealed[self._pending_stream] += self._count_sealed[self._pending_stream].add(raw)
        chunk.update(self._position())
        with self.spool_path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(chunk, ensure_ascii=False) + "\n")
        self._queue.append(chunk)
        self._spool_bytes += n
        self.next_seq += 1
        self.resume_offset += n
        self._last_seal = self.clock()

    @property
    def took_any(self) -> bool:
        """Whether any output was spooled or is waiting to be (after a restart: spooled before it)."""
        with self._lock:
            return any(self._taken.values())

    @property
    def read_at(self) -> int | None:
        """Wall-clock ns when the output fed (or, after a restart, spooled) last was read."""
        return self._fed_at or self.resume_read_at

    def _position(self) -> dict:
        """Where the sealed output ends, for a replay after a restart: engine bytes per stream, read when."""
        return {"ends": [self._sealed[k] for k in STREAMS], "read_at": self._fed_at or None}

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
                # Even the gap notice was refused: nothing more can be recorded on the server; the agent's log says it.
                log.warning(
                    "attempt %s: the server refused even the notice of a gap (%s %s): output %s-%s is not recorded",
                    self.attempt_id,
                    exc.status,
                    exc.code,
                    batch[0]["offset"],
                    batch[0]["end"],
                )
            self._backoff = 0.0
            self._acknowledge(batch, capped=bool(isinstance(reply, dict) and reply.get("capped")))
            if self.capped:
                return True

    def _next_batch(self, most: int) -> tuple[list[dict], dict]:
        """The oldest spooled chunks (at most `most`) whose request fits, and that request (logbatch.wire_batch)."""
        with self._lock:
            queued = list(itertools.islice(self._queue, most))
        return wire_batch(queued)

    def _make_gap(self, reason: str) -> None:
        """The first queued chunk is refused even alone: it becomes a gap (marker + log_truncated on the server)."""
        with self._lock:
            self._queue[0] = as_gap(self._queue[0], reason)

    def _retry_later(self) -> None:
        self._backoff = min(max(self._backoff * 2, 0.2), 3.0)
        self._next_retry = self.clock() + self._backoff

    def _acknowledge(self, batch: list[dict], *, capped: bool) -> None:
        with self._lock:
            for _ in batch:
                done = self._queue.popleft()
                self._spool_bytes -= done["end"] - done["offset"]
            self.acked_seq, self.acked_end = batch[-1]["seq"], batch[-1]["end"]
            self._acked_position = {k: batch[-1][k] for k in ("ends", "read_at") if k in batch[-1]}
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
