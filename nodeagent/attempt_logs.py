"""Reading one attempt's output into its LogShipper: from the attach made before the start, or from the engine's log.

The reader runs on its own thread and only feeds the shipper; it tells the attempt's owner thread what it found
through two callbacks (`first_entry`: the engine log's first timestamp, to keep in the record; `done`: the output
ended). It never moves the attempt's phase.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from nodeagent.enginelog import LogCursor, engine_entry_bytes_at_most, engine_log_never_rotated
from nodeagent.logship import LogShipper

ROTATED = "the engine's log rotated it away before the agent read it"
STOPPED_UNREAD = "the job was stopped while its output waited for the control plane; the rest was not read"
STOPPING_SPOOL_FACTOR = 2  # a stopping job's output may fill the spool to twice its bound (see _read_attached)
# While attached, how often and how many times the engine log's first entry is looked for (_note_first_entry).
ANCHOR_RETRY_SECONDS = 0.05
ANCHOR_TRIES = 100
ANCHOR_MOST_FRAMES = 10_000  # past this many frames the note is not worth its cost: the replay judges by size
# An attach that ended (EOF) is the end of the output once the container exits within this many seconds.
ATTACH_EXIT_SECONDS = 5.0


class OutputReader:
    """One attempt's output, read on a thread of its own until it ends, the cap is reached or the agent closes."""

    def __init__(
        self,
        *,
        runner,
        cid: str,
        shipper: LogShipper,
        attach=None,
        log_first_ts: int | None = None,
        closing: threading.Event,
        stop_asked: threading.Event,
        exited: threading.Event,
        first_entry: Callable[[int], None],
        done: Callable[[], None],
        log: logging.Logger,
        attempt_id: int,
    ):
        self.runner, self.cid, self.shipper = runner, cid, shipper
        self.stream = attach  # what is read now: the AttachStream (fresh start) or a LogStream (engine log)
        self._attach = attach
        self._noted = log_first_ts  # the engine log's first timestamp, as an earlier attached reader noted it
        self.closing, self.stop_asked, self.exited = closing, stop_asked, exited
        self._first_entry, self._done = first_entry, done
        self.ended = threading.Event()
        self.log, self.attempt_id = log, attempt_id

    def start(self) -> None:
        target = self._read_attached if self._attach is not None else self._read_logs
        threading.Thread(target=target, daemon=True, name=f"euler-output-{self.attempt_id}").start()

    def close(self) -> None:
        """Stop reading (cap reached, agent closing). Closing an attach releases the job's writes."""
        stream = self.stream
        if stream is not None:
            stream.close()

    def _end(self) -> None:
        self.ended.set()
        self._done()

    def _read_attached(self) -> None:
        """The job's output from the attach made before its start: every byte, in order, until it ends (EOF).

        While the shipper's spool is full (control plane unreachable) this reader waits, so the engine blocks
        the job's writes, like a slow terminal: output is slowed, never lost. The cap closes the attach.
        """
        attach, shipper, noting, early = self._attach, self.shipper, False, False
        try:
            for stream, data in attach.frames():
                if not noting:
                    noting = True
                    threading.Thread(target=self._note_first_entry, daemon=True).start()
                shipper.wait_for_room(self.closing, self.stop_asked)
                if shipper.capped or self.closing.is_set():
                    break
                if self.stop_asked.is_set() and shipper.spool_full(STOPPING_SPOOL_FACTOR):
                    # The engine cannot end a container whose attach is not read: a stopping job's last output
                    # is taken past the spool's bound, up to a point; past it the attach is closed, said so.
                    shipper.record_gap(STOPPED_UNREAD)
                    break
                shipper.feed(stream, data)
            else:
                # The attach ends with the container's output. One that ends while the container runs on (the
                # engine dropped it, or the job closed its stdout and stderr) hands over to the engine's log.
                early = not (shipper.capped or self.closing.is_set() or self.exited.wait(ATTACH_EXIT_SECONDS))
                if early:
                    state = self.runner.inspect(self.cid)
                    early = state is not None and state.status == "running"
        except Exception:  # noqa: BLE001 - the container ended or vanished; what was read is shipped
            self.log.exception("attempt %s: reading the attached output failed", self.attempt_id)
        finally:
            attach.close()
        if early and not shipper.capped:
            self.log.warning("attempt %s: the attach ended before the container: reading its log", self.attempt_id)
            self._read_logs()
            return
        if not self.closing.is_set():
            shipper.finish()
        self._end()

    def _note_first_entry(self) -> None:
        """Hand the owner the engine log's first timestamp, once it is surely the job's first entry, so that a
        restarted agent can tell whether the engine still holds the log from its first byte (_engine_log_complete).

        The engine writes its copy just after handing the bytes to the attach: an empty log is looked at again.
        A log already too large to tell gives nothing (the restarted agent then judges by size alone).
        """
        for _ in range(ANCHOR_TRIES):
            try:
                first, sure = self._engine_log_start(whole=True, most_frames=ANCHOR_MOST_FRAMES)
            except Exception:  # noqa: BLE001 - only an aid to a later replay
                return
            if first is not None:
                if sure:
                    self._noted = first  # an attach that ends early hands over to the engine log, which checks it
                    self._first_entry(first)
                return
            if self.ended.wait(ANCHOR_RETRY_SECONDS) or self.closing.is_set():
                return

    def _engine_log_start(self, *, whole: bool, most_frames: int | None = None) -> tuple[int | None, bool]:
        """(the engine log's first timestamp or None when it is empty, whether that is surely the job's first).

        `whole`: read on to tell, by size, whether json-file can have deleted anything (engine_log_never_rotated),
        stopping as soon as it holds too much to tell (or more than `most_frames`); else only the first frame is
        read (sure: False).
        """
        rotation = self.runner.log_rotation(self.cid) if whole else None
        first, retained, frames = None, 0, 0
        stream = self.runner.stamped_logs(self.cid, follow=False)
        try:
            for _, ts, data in stream.stamped():
                if first is None:
                    first = ts
                    if rotation is None:
                        return first, False
                retained += engine_entry_bytes_at_most(data)
                frames += 1
                if not engine_log_never_rotated(retained, max_size=rotation[0], max_file=rotation[1]) or (
                    most_frames is not None and frames > most_frames
                ):
                    return first, False
        finally:
            stream.close()
        return first, first is not None and rotation is not None

    def _engine_log_complete(self) -> tuple[bool, int | None]:
        """(whether the engine's log surely still holds the job's first byte, its first timestamp).

        Surely: it starts at the first timestamp the attached reader noted, or it holds too little for json-file
        to have deleted anything.
        """
        noted = self._noted
        first, sure = self._engine_log_start(whole=not noted)
        if first is None:  # nothing held: complete only if nothing was read either
            return not self.shipper.took_any, noted
        if noted:
            return first == noted, first
        return sure, first

    def _read_logs(self) -> None:
        """The engine's log (json-file), after an agent restart or when no attach could be made.

        It is read from its first byte and the shipper skips what it already spooled, when the engine still holds
        that first byte. When it does not (rotated away while no agent read), the spool no longer lines up with
        it: a gap is recorded and reading resumes from when the spooled output was read. A follow stream the
        engine ends (at a rotation) is reopened `since` its last frame; a reopened stream that no longer holds
        that frame records a gap too.
        """
        runner, shipper, cursor, finished = self.runner, self.shipper, LogCursor(), False
        try:
            complete, first = False, None
            if shipper.resume_ends is not None:  # else a spool from an older agent: cannot line up
                complete, first = self._engine_log_complete()
            gapped = not complete
            if gapped:
                shipper.record_gap(ROTATED)
                if shipper.read_at:
                    cursor.start_after(shipper.read_at)  # when the spooled output was read
            while not self.closing.is_set() and not shipper.capped:
                replay = cursor.since is None and not gapped
                if replay:
                    shipper.rewind()  # from the first byte: the shipper skips what it already spooled
                cursor.reopen()
                # Once the container exited, one plain read from where the last stream stopped takes the rest.
                self.stream = runner.stamped_logs(self.cid, follow=not finished, since_ns=cursor.since)
                check_first = replay and first is not None
                for stream, ts, data in self.stream.stamped():
                    if check_first:
                        check_first = False
                        if ts != first:  # rotated away between the check and this stream
                            gapped = True
                            shipper.record_gap(ROTATED)
                    if not self._feed_engine(cursor, stream, cursor.take(ts, data, stream)):
                        break
                if shipper.capped or finished:
                    break
                state = runner.inspect(self.cid)
                if state is None or state.removing:
                    break
                finished = state.finished
        except Exception:  # noqa: BLE001 - the container ended or vanished; what was read is shipped
            self.log.exception("attempt %s: reading logs failed", self.attempt_id)
        finally:
            if not self.closing.is_set():
                shipper.finish()
            self._end()

    def _feed_engine(self, cursor: LogCursor, stream: str, data: bytes) -> bool:
        """Feed what the cursor took from the engine's log, after the gap it found if any; False once capped."""
        if cursor.rotated_away:
            cursor.rotated_away = False
            self.shipper.record_gap(ROTATED)
        if data:
            self.shipper.wait_for_room(self.closing, self.stop_asked)
            self.shipper.feed(stream, data, read_at=cursor.last)  # the engine's stamp: where a later gap resumes
        return not self.shipper.capped
