"""Cutting output into chunks and spooled chunks into wire batches (pure): UTF-8 boundaries, the chunk's text,
and the oldest spooled entries whose `protocol.LogBatch` fits MAX_LOG_REQUEST_BYTES.

A spooled entry is a dict: `seq`, `offset`, `end` (byte offsets in the attempt's combined stream), then either
`stream` and `data` (a chunk) or `gap` (the reason: output refused or never read), and where a replay resumes
(`ends`, `read_at`).
"""

from __future__ import annotations

from collections.abc import Iterable

from nodeagent import protocol

_EMPTY_BODY = len(protocol.encode_json({"chunks": [], "gaps": []}))


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


def chunk_text(raw: bytes) -> str:
    # PostgreSQL text cannot hold NUL; offsets stay byte-exact because `end` is kept beside the chunk.
    return raw.decode("utf-8", errors="replace").replace("\x00", "\ufffd")


def wire_batch(queued: Iterable[dict]) -> tuple[list[dict], dict]:
    """The leading spooled entries whose encoded request fits MAX_LOG_REQUEST_BYTES (at least one), and that
    request: a `protocol.LogBatch` (validated as it is built), as the wire body ("gaps" only when there are)."""
    batch, chunks, gaps, size = [], [], [], _EMPTY_BODY
    for c in queued:
        if "gap" in c:
            item = protocol.LogGap(seq=c["seq"], offset=c["offset"], bytes=c["end"] - c["offset"], reason=c["gap"])
        else:
            item = protocol.LogChunk(seq=c["seq"], offset=c["offset"], stream=c["stream"], data=c["data"])
        grown = size + len(protocol.encode_json(item.model_dump())) + (1 if batch else 0)
        if batch and grown > protocol.MAX_LOG_REQUEST_BYTES:
            break
        size = grown
        batch.append(c)
        (gaps if "gap" in c else chunks).append(item)
    body = protocol.LogBatch(chunks=chunks, gaps=gaps)
    return batch, body.model_dump(exclude={"gaps"} if not gaps else None)


def as_gap(entry: dict, reason: str) -> dict:
    """A spooled chunk the server refused even alone, as a gap of the same bytes (a marker and log_truncated on
    the server), keeping where a replay resumes."""
    gap = {"seq": entry["seq"], "offset": entry["offset"], "end": entry["end"], "gap": reason[:200]}
    gap.update({k: entry[k] for k in ("ends", "read_at") if k in entry})
    return gap
