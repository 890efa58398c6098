"""Stored job logs: hot chunks (LogChunk, one row each) and, for ended attempts, one compacted LogArchive row.

Readers call `chunks_after` and `full_text`, which merge both stores by seq, so what they answer does not
depend on whether an attempt was compacted. Compaction (beat, `compact_ended`) runs once an attempt has
been ended for EULER_LOG_COMPACT_AFTER seconds, under the attempt's row lock (the one ingest takes), and
folds any chunk that arrives later (an agent replaying its buffer) into the archive on the next pass.

Archive format: zlib(JSON header line + UTF-8 text), the header listing [seq, offset, stream, bytes] per chunk.
"""

from __future__ import annotations

import json
import threading
import zlib
from collections import OrderedDict
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Value
from django.db.models.functions import Length
from django.utils import timezone

from euler.prepared import Prepared
from jobs.models import Attempt, LogArchive, LogChunk
from jobs.states import ATTEMPT_ACTIVE

FORMAT_VERSION = 1
READ_BATCH = 500  # chunks a reader is sent per read (the websocket's backlog, a follow's step)
ZLIB_LEVEL = 6


@dataclass(frozen=True)
class Chunk:
    seq: int
    offset: int
    stream: str
    data: str


# --- the pure part: encode and decode an archive ------------------------------------------------
def encode(chunks: list[Chunk]) -> bytes:
    """One compressed blob holding `chunks` (sorted by seq, seqs unique)."""
    texts = [c.data.encode() for c in chunks]
    header = {
        "v": FORMAT_VERSION,
        "chunks": [[c.seq, c.offset, c.stream, len(t)] for c, t in zip(chunks, texts, strict=True)],
    }
    raw = json.dumps(header, separators=(",", ":")).encode() + b"\n" + b"".join(texts)
    return zlib.compress(raw, ZLIB_LEVEL)


def decode(blob: bytes) -> list[Chunk]:
    raw = zlib.decompress(bytes(blob))
    line, _, body = raw.partition(b"\n")
    header = json.loads(line)
    if header.get("v") != FORMAT_VERSION:
        raise ValueError(f"unknown log archive format {header.get('v')!r}")
    chunks, at = [], 0
    for seq, offset, stream, size in header["chunks"]:
        chunks.append(Chunk(seq, offset, stream, body[at : at + size].decode()))
        at += size
    return chunks


def merge(archived: list[Chunk], hot: list[Chunk]) -> list[Chunk]:
    """Both stores as one sequence by seq; a seq in both (a late replay of a compacted chunk) counts once."""
    by_seq = {c.seq: c for c in hot}
    by_seq.update({c.seq: c for c in archived})
    return [by_seq[s] for s in sorted(by_seq)]


# --- reads ---------------------------------------------------------------------------------------
class _DecodedCache:
    """Recently decoded archives per process, so that a reader paging through a long log (the websocket's
    backlog, `?follow=1`) decompresses it once. An entry is valid while the archive's (chunks, raw_bytes,
    compressed size) is unchanged: recompaction only ever adds chunks."""

    def __init__(self, max_bytes: int):
        self.max_bytes, self.used = max_bytes, 0
        self.entries: OrderedDict[int, tuple[tuple, list[Chunk]]] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, attempt_id: int, version: tuple) -> list[Chunk] | None:
        with self.lock:
            hit = self.entries.get(attempt_id)
            if hit is None or hit[0] != version:
                return None
            self.entries.move_to_end(attempt_id)
            return hit[1]

    def put(self, attempt_id: int, version: tuple, chunks: list[Chunk]) -> None:
        size = version[1]
        if size > self.max_bytes:
            return
        with self.lock:
            old = self.entries.pop(attempt_id, None)
            if old is not None:
                self.used -= old[0][1]
            self.entries[attempt_id] = (version, chunks)
            self.used += size
            while self.used > self.max_bytes:
                _, (evicted, _chunks) = self.entries.popitem(last=False)
                self.used -= evicted[1]


_decoded = _DecodedCache(max_bytes=64 * 1024 * 1024)


# A reader's reads, built once (euler/prepared.py): the live log websocket reads them as it connects and again
# as the job ends, before it sends `end`.
_VERSION = Prepared(
    lambda attempt_id: LogArchive.objects.filter(attempt_id=attempt_id).values_list(
        "chunks", "raw_bytes", Length("data")
    )[:1]
)


def _hot_rows(attempt_id: int, after_seq: int):
    # Value(): a bound kept in the statement, even -1 (below the column's range, the ORM would drop the condition
    # for that value alone, and the statement built once would not be the one for every bound).
    rows = LogChunk.objects.filter(attempt_id=attempt_id, seq__gt=Value(after_seq)).order_by("seq")
    return rows.values_list("seq", "offset", "stream", "data")


_HOT = Prepared(_hot_rows)
_HOT_BATCH = Prepared(lambda attempt_id, after_seq: _hot_rows(attempt_id, after_seq)[:READ_BATCH])


_LAST_HOT = Prepared(
    lambda attempt_id: LogChunk.objects.filter(attempt_id=attempt_id).order_by("-seq").values_list("seq", flat=True)[:1]
)


def last_seq(attempt_id: int) -> int | None:
    """The seq of the attempt's last stored chunk (-1: none yet); None once it has an archive (not read here)."""
    if _VERSION.first(attempt_id) is not None:
        return None
    seq = _LAST_HOT.first(attempt_id)
    return -1 if seq is None else seq


def _archived(attempt_id: int) -> list[Chunk]:
    archives = LogArchive.objects.filter(attempt_id=attempt_id)
    version = _VERSION.first(attempt_id)
    if version is None:
        return []
    chunks = _decoded.get(attempt_id, version)
    if chunks is None:
        row = archives.values_list("chunks", "raw_bytes", Length("data"), "data").first()
        version, chunks = row[:3], decode(row[3])
        _decoded.put(attempt_id, version, chunks)
    return chunks


def _hot(attempt_id: int, after_seq: int = -1, limit: int | None = None) -> list[Chunk]:
    if limit is None:
        rows = _HOT(attempt_id, after_seq)
    elif limit == READ_BATCH:
        rows = _HOT_BATCH(attempt_id, after_seq)
    else:
        rows = _hot_rows(attempt_id, after_seq)[:limit]
    return [Chunk(*r) for r in rows]


def chunks_after(attempt_id: int, after_seq: int, limit: int) -> list[tuple[int, str, str]]:
    """Up to `limit` chunks with seq > after_seq, in order, as (seq, stream, data)."""
    hot = _hot(attempt_id, after_seq, limit)  # hot first: a compaction in between moves rows to where we look next
    archived = [c for c in _archived(attempt_id) if c.seq > after_seq]
    chunks = merge(archived, hot)[:limit]
    return [(c.seq, c.stream, c.data) for c in chunks]


def all_chunks(attempt_id: int) -> list[Chunk]:
    hot = _hot(attempt_id)  # before the archive, as in chunks_after
    return merge(_archived(attempt_id), hot)


def full_text(attempt_id: int) -> str:
    return "".join(c.data for c in all_chunks(attempt_id))


# --- compaction ----------------------------------------------------------------------------------
def compact_attempt(attempt_id: int) -> bool:
    """Fold an ended attempt's hot chunks into its archive; False when there was nothing to do."""
    with transaction.atomic():
        attempt = (
            Attempt.objects.select_for_update()
            .filter(pk=attempt_id)
            .exclude(state__in=ATTEMPT_ACTIVE)
            .only("pk")
            .first()
        )
        if attempt is None:
            return False
        hot = _hot(attempt_id)
        if not hot:
            return False
        chunks = merge(_archived(attempt_id), hot)
        raw_bytes = sum(len(c.data.encode()) for c in chunks)
        LogArchive.objects.update_or_create(
            attempt_id=attempt_id, defaults={"chunks": len(chunks), "raw_bytes": raw_bytes, "data": encode(chunks)}
        )
        LogChunk.objects.filter(attempt_id=attempt_id, seq__lte=hot[-1].seq).delete()
    return True


def compact_ended(*, now=None, batch: int | None = None) -> int:
    """Compact attempts ended at least EULER_LOG_COMPACT_AFTER seconds ago that still hold hot chunks."""
    now = now or timezone.now()
    batch = batch or settings.EULER_RETENTION_BATCH
    before = now - timedelta(seconds=settings.EULER_LOG_COMPACT_AFTER)
    total = 0
    while True:
        ids = list(
            Attempt.objects.filter(pk__in=LogChunk.objects.values("attempt_id"), ended_at__lte=before)
            .exclude(state__in=ATTEMPT_ACTIVE)
            .order_by("pk")
            .values_list("pk", flat=True)[:batch]
        )
        done = sum(compact_attempt(pk) for pk in ids)
        total += done
        if len(ids) < batch or done == 0:
            return total
