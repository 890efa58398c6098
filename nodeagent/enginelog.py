"""The engine's json-file log as the agent reads it back (pure): how many bytes it holds per entry, whether it can
have deleted the first one, how bytes count in it, and where a reader is in it (LogCursor).
"""

from __future__ import annotations

import codecs

STREAMS = ("stdout", "stderr")
# What json-file writes around one entry at most: {"log":"","stream":"stdout","time":"<RFC 3339, ns>"} and \n.
ENGINE_ENTRY_ENVELOPE_BYTES = 80
# Bytes JSON may escape to 6 (\u00XX): control characters, HTML-sensitive ones, and anything not ASCII (an
# upper bound: valid UTF-8 is written as is, invalid bytes as \ufffd).
_ESCAPABLE = bytes(range(0x20)) + b'"\\<>&' + bytes(range(0x7F, 0x100))


def engine_entry_bytes_at_most(data: bytes) -> int:
    """At most how many bytes json-file's file holds for one entry (one frame read back) of `data`."""
    special = len(data) - len(data.translate(None, _ESCAPABLE))
    return ENGINE_ENTRY_ENVELOPE_BYTES + len(data) + 5 * special


def engine_log_never_rotated(retained_at_most: int, *, max_size: int, max_file: int) -> bool:
    """Pure: whether the engine's json-file log still holds its first entry, from what it holds now.

    json-file rotates a file once it reached `max_size` and deletes the oldest only when `max_file` files
    exist, so once anything was deleted at least `max_file - 1` full files remain. Less than that retained
    (`retained_at_most`: an upper bound, see engine_entry_bytes_at_most): nothing was ever deleted.
    """
    return max_file >= 2 and retained_at_most < (max_file - 1) * max_size


class EngineCount:
    """Counts bytes of one stream as the engine's json-file copy holds them (invalid UTF-8 as U+FFFD, 3 bytes).

    The Go encoder behind json-file replaces each byte that does not start or continue a valid sequence;
    Python's decoder with surrogateescape maps exactly those bytes to one lone surrogate each.
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="surrogateescape")

    def add(self, data: bytes) -> int:
        text = self._decoder.decode(data)
        return len(text.encode("utf-8", errors="surrogatepass"))


class LogCursor:
    """Where a reader is in the engine's log: per stream, the last timestamp taken and the bytes taken at it.

    The engine stamps each stream's entries in the order it writes them (the two streams may interleave
    slightly out of timestamp order), and the partial entries of one long line share a timestamp. So a frame
    older than its stream's position, or one more at that position once its complete line was taken, is one
    the engine sends again: on Docker 20.10 a follow stream resends a few entries at each json-file rotation,
    and a reopened stream starts a little before the last frame (REOPEN_MARGIN_NS, for the interleaving).

    A follow stream can end early (the engine ends it at some rotations); the reader opens a new one `since`
    (inclusive) and `take` drops what it already had. A reopened stream whose first frame of the last frame's
    stream is newer than that frame no longer holds it: a rotation deleted it with whatever followed it in the
    deleted file, and `rotated_away` is set.
    """

    REOPEN_MARGIN_NS = 1_000_000_000

    def __init__(self) -> None:
        self.last: int | None = None  # timestamp of the last frame taken
        self.kind: str | None = None  # and its stream
        self._pos: dict[str, list] = {}  # stream -> [timestamp, bytes taken at it, bytes to skip at it, line ended]
        self._want: tuple[str, int] | None = None  # a reopened stream must still hold this stream's frame
        self.rotated_away = False

    @property
    def since(self) -> int | None:
        """Where a new stream starts: a little before the last frame; None: from the first byte."""
        return None if self.last is None else max(0, self.last - self.REOPEN_MARGIN_NS)

    def start_after(self, ts: int) -> None:
        """Take only frames newer than `ts` from now on (the log cannot be lined up by count any more)."""
        self.last, self.kind, self._want = ts, None, None
        self._pos = {k: [ts, 0, 0, True] for k in STREAMS}

    def reopen(self) -> None:
        for pos in self._pos.values():
            pos[2] = pos[1]  # what was taken at each stream's last timestamp comes again
        self._want = (self.kind, self._pos[self.kind][0]) if self.kind in self._pos else None

    def take(self, ts: int | None, data: bytes, kind: str | None = None) -> bytes:
        """The part of a frame not taken yet; `kind` is its stream."""
        if ts is None:
            return data
        kind = kind or "stdout"
        if self._want is not None and kind == self._want[0]:
            if ts > self._want[1]:
                self.rotated_away = True
            self._want = None
        pos = self._pos.get(kind)
        if pos is None:
            pos = self._pos[kind] = [ts, 0, 0, False]
        elif ts < pos[0]:
            pos[2] = pos[1]  # the engine went back: what was taken at the position comes again
            return b""
        elif ts > pos[0]:
            pos[:] = [ts, 0, 0, False]
        elif pos[2] == 0 and pos[3]:
            pos[2] = pos[1]  # a whole line was taken at this timestamp: this is it again
        if pos[2]:
            n = min(pos[2], len(data))
            pos[2] -= n
            data = data[n:]
            if not data:
                return b""
        pos[1] += len(data)
        pos[3] = data.endswith(b"\n")
        self.last, self.kind = ts, kind
        return data
