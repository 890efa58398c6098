"""One chunk of a stored file, received from its node: an output file or a checkpoint's blob (the server's store).

The checks and the append are the same for both; the caller holds the row's lock (jobs.fencing, Lock.ATTEMPT),
saves what changed and counts the progress (jobs.outputs.keepalive)."""

from __future__ import annotations

import enum

from euler.errors import Conflict, InvalidInput
from jobs.outputs import rules, store


class Took(enum.Enum):
    HELD = "held"  # the row was complete already: nothing changed, and it is no progress
    MISMATCH = "mismatch"  # the last chunk completed bytes whose sha256 is not the row's: reset, send from 0
    PROGRESS = "progress"  # appended (`row.received` moved; `row.complete` set when it finished and matched)


def take(row, *, content_range: str | None, data: bytes, stored: str, noun: str) -> Took:
    """Append `data` to `row` (`size`, `received`, `complete`, `sha256`, `storage_key`) at its Content-Range.

    `stored` and `noun` name them in the errors ("outputs", "file"; "checkpoints", "blob"): 400
    `use_presigned_put` on a bucket store, 400 `invalid_content_range`, 409 `offset_mismatch` with the offset."""
    if store.is_bucket():
        raise InvalidInput(f"This server stores {stored} in a bucket: PUT to the plan's URL.", code="use_presigned_put")
    parsed = rules.content_range(content_range)
    if parsed is None:
        raise InvalidInput("Content-Range must be `bytes START-END/SIZE`.", code="invalid_content_range")
    start, end, size = parsed
    if size != row.size or len(data) != end - start + 1:
        raise InvalidInput(f"The chunk does not match its Content-Range or the {noun}'s size ({row.size}).",
                           code="invalid_content_range")  # fmt: skip
    if row.complete:
        return Took.HELD
    if start != row.received:
        raise Conflict(f"The server holds {row.received} bytes of this {noun}: send from there.",
                       code="offset_mismatch", extra={"offset": row.received})  # fmt: skip
    row.received = store.append(row.storage_key, start, data)
    if row.received == row.size:
        if store.sha256_hex(row.storage_key) != row.sha256:
            store.reset(row.storage_key)
            row.received = 0
            return Took.MISMATCH
        row.complete = True
    return Took.PROGRESS
