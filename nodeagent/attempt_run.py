"""One attempt on this host, driven by its own thread: start, report, ship logs, stop, end, remove."""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from dataclasses import dataclass

from nodeagent import protocol
from nodeagent.client import Refused, Unreachable
from nodeagent.containers import create_kwargs
from nodeagent.docker_runner import ContainerGone, ContainerState, RunnerError, RunnerUnavailable
from nodeagent.logship import (
    LogCursor,
    LogShipper,
    Stale,
    engine_entry_bytes_at_most,
    engine_log_never_rotated,
)

LOOP_SECONDS = 0.05
REASONS = {"timeout": "timeout", "cancelled": "cancelled", "disk_limit": "disk_limit"}
INIT_EXEC_FAILED = re.compile(r"\[FATAL tini \(\d+\)\] (exec .* failed: .*)")
VANISHED = "the container disappeared: removed outside the agent (docker rm -f) or lost by the Docker engine"
NEVER_STARTED = "the node agent restarted between creating the container and starting it; the attempt is retried"
ROTATED = "the engine's log rotated it away before the agent read it"
STOPPED_UNREAD = "the job was stopped while its output waited for the control plane; the rest was not read"
STOPPING_SPOOL_FACTOR = 2  # a stopping job's output may fill the spool to twice its bound (see _read_attached)
# While attached, how often and how many times the engine log's first entry is looked for (_note_first_entry).
ANCHOR_RETRY_SECONDS = 0.05
ANCHOR_TRIES = 100
ANCHOR_MOST_FRAMES = 10_000  # past this many frames the note is not worth its cost: the replay judges by size
# An attach that ended (EOF) is the end of the output once the container exits within this many seconds.
ATTACH_EXIT_SECONDS = 5.0


@dataclass(frozen=True)
class Exit:
    code: int | None
    oom_killed: bool = False
    vanished: bool = False
    message: str = ""


def classify_exit(*, code: int | None, state: ContainerState | None, engine_restarted: bool) -> Exit:
    """How a container's run ended, from the engine's wait result and one inspect after it.

    A container that is gone, being removed, or whose engine restarted under it did not end on its own:
    the attempt is `lost` (the retry policy applies), never `failed` with no exit code.
    """
    if state is None or state.removing:
        return Exit(code=None, vanished=True, message=VANISHED)
    if engine_restarted:
        return Exit(
            code=None,
            vanished=True,
            message=f"the Docker engine restarted under the container (it exited with {state.exit_code})",
        )
    if code is None:
        code = state.exit_code
    return Exit(code=code, oom_killed=state.oom_killed)


class AttemptRun:
    def __init__(self, executor, record: dict, *, assignment: protocol.Assignment | None):
        self.ex = executor
        self.record = record
        self.attempt_id = int(record["attempt_id"])
        self.assignment = assignment  # holds the env: kept in memory only, never written or logged
        self.state = "starting"
        self.exit_code: int | None = None
        self.stop_reason: str | None = None
        self.stop_message = ""
        self.stale = False
        self._stop_requested = threading.Event()
        self._stopping = False
        self._reader_done = threading.Event()
        self._exited = threading.Event()
        self._exit: Exit | None = None
        self._stream = None  # what the reader reads: an AttachStream (fresh start) or a LogStream (engine log)
        self._attach = None
        self._reading = False  # a reader thread was started
        self._save_lock = threading.Lock()
        self._forgotten = False
        self.thread = threading.Thread(target=self._main, daemon=True, name=f"euler-attempt-{self.attempt_id}")
        self.shipper = LogShipper(
            attempt_id=self.attempt_id,
            spool_dir=self.ex.spool_dir,
            send=self._send_logs,
            max_spool_bytes=self.ex.max_spool_bytes,
            flush_seconds=self.ex.log_flush_seconds,
        )

    # --- called from other threads ---------------------------------------------------------------
    def running_attempt(self) -> protocol.RunningAttempt:
        return protocol.RunningAttempt(
            attempt_id=self.attempt_id,
            state=self.state,
            container_id=self.record.get("container_id", "")[:128],
            exit_code=self.exit_code,
        )

    def request_stop(self, reason: str) -> None:
        if reason == "stale_attempt":
            self.stale = True
        if self.stop_reason is None:
            self.stop_reason = REASONS.get(reason, "cancelled")
        self._stop_requested.set()

    def disk_exceeded(self, message: str) -> None:
        """From the disk guard, which already killed the container: the attempt ends `disk_limit`."""
        if self.stop_reason is None:
            self.stop_message = message
        self.request_stop("disk_limit")

    def close_reader(self) -> None:
        """Stop reading the job's output (cap reached, agent closing). Closing an attach releases the job's writes."""
        stream = self._stream
        if stream is not None:
            stream.close()

    # --- the thread -------------------------------------------------------------------------------
    def _main(self) -> None:
        log = self.ex.log
        try:
            fresh = not self.record.get("container_id")
            if fresh and not self._start():
                return
            self._follow(fresh=fresh)
        except Stale:
            log.info("attempt %s is no longer current: stopping its container", self.attempt_id)
            self._discard()
        except _Closing:
            pass
        except Exception:  # noqa: BLE001 - one attempt's failure must not take the agent down
            log.exception("attempt %s failed in the executor", self.attempt_id)
        finally:
            if self._attach is not None and not self._reading:
                self._attach.close()  # never read: an unread attach would hold the job's writes
            self.ex._finished(self)

    def _save(self, **updates) -> None:
        path = self.ex.records_dir / f"{self.attempt_id}.json"
        tmp = path.with_suffix(".tmp")
        with self._save_lock:  # the run thread and the first-entry note both save
            if self._forgotten:
                return  # ended: its files are gone and stay gone
            self.record.update(updates)
            tmp.write_text(json.dumps(self.record))
            tmp.replace(path)

    def _start(self) -> bool:
        """Image, create, start, `running` report; False when the attempt ended before running."""
        a = self.assignment
        runner = self.ex.runner
        self._save()
        if self._stop_requested.is_set():
            self._end(reason=self.stop_reason or "cancelled", exit_code=None, message="stopped before start")
            return False
        refused = self.ex.refuse_reason(a)
        if refused:
            self._end(reason="start_failed", exit_code=None, message=refused)
            return False
        self.record["disk_bytes"] = a.disk_bytes  # a restarted agent goes on guarding the disk
        try:
            self.ex.ensure_image(a)
            # A container of this attempt's name left by an agent that died mid-start is found, not duplicated.
            kwargs = create_kwargs(
                a,
                node_name=self.ex.node_name,
                owner=self.ex.owner,
                log_max_bytes=self.ex.container_log_bytes,
                **self.ex.container_options(a),
            )
            # Attached before the start: the job's output is read from the first byte, with backpressure.
            cid, self._attach = runner.create_attach_and_start(kwargs)
            self._stream = self._attach  # from here on close_reader (agent closing) releases it
        except RunnerError as exc:
            self.ex.log.info("attempt %s: %s", self.attempt_id, exc.reason)
            self._end(reason=exc.reason, exit_code=None, message=exc.message)
            return False
        self.record["container_id"] = cid
        self.record["deadline"] = time.time() + a.timeout_seconds
        self._save()
        return True

    def _follow(self, *, fresh: bool) -> None:
        runner, cid = self.ex.runner, self.record["container_id"]
        if fresh:
            self.state = "running"  # just started: the exit, if any, is read after the log ends
        else:
            state = runner.inspect(cid)
            if state is None or state.removing:
                self.ex.log.info("attempt %s: its container is gone", self.attempt_id)
                self._end(reason="lost", exit_code=None, message=VANISHED)
                return
            if state.status == "created":
                # The last agent died between creating and starting it: no deadline, no attach, no `running`
                # report. Nothing of the job ran, so the attempt is `lost` and the retry policy starts it anew.
                self.ex.log.info("attempt %s: its container was never started: lost", self.attempt_id)
                self._end(reason="lost", exit_code=None, message=NEVER_STARTED)
                runner.remove(cid)
                return
            self.state = "exited" if state.finished else "running"
        # The reader starts before the `running` report: an attached job must not wait for the control plane
        # to answer it (the reader only spools; shipping starts in the loop below).
        if self.shipper.capped:
            self._reader_done.set()  # the log was full before a restart: nothing more to read
            if self._attach is not None:
                self._attach.close()
        elif self._attach is not None:
            self._reading = True
            threading.Thread(target=self._read_attached, args=(cid, self._attach), daemon=True).start()
        else:
            self._reading = True
            threading.Thread(target=self._read_logs, args=(cid,), daemon=True).start()
        # The exit is waited for from now on: a short job's end is known by the time the control plane answers.
        threading.Thread(target=self._wait_exit, args=(cid,), daemon=True).start()
        if not self.record.get("running_reported"):
            self._report({"state": "running", "container_id": cid})
            self._save(running_reported=True)
        self.ex.watch_disk(self, cid)  # until the run finishes (Executor._finished)
        deadline = self.record.get("deadline")
        while not (self._reader_done.is_set() and self._exited.is_set()):
            self._check_closing()
            if deadline and time.time() >= deadline and not self._stop_requested.is_set():
                self.request_stop("timeout")
            if self._stop_requested.is_set() and not self._stopping:
                self._stopping = True
                threading.Thread(
                    target=runner.stop, args=(cid,), kwargs={"grace": self.ex.stop_grace}, daemon=True
                ).start()
            if self.stale:
                raise Stale("stale_attempt")
            if self.shipper.capped and not self._reader_done.is_set():
                self.close_reader()  # the server keeps no more: stop reading, wait for the exit only
            self.shipper.ship()
            self._wait_for_output()
        exit_ = self._exit
        self.exit_code = exit_.code
        self.state = "exited"
        self._drain_logs()
        if self.stale:
            raise Stale("stale_attempt")
        if exit_.vanished:
            self.ex.log.warning("attempt %s: %s", self.attempt_id, exit_.message)
            self._end(reason="lost", exit_code=None, message=exit_.message)
            with contextlib.suppress(Exception):  # after an engine restart it is still there, exited
                runner.remove(cid)
            return
        message = ""
        if self.stop_reason:
            reason = self.stop_reason
        elif exit_.oom_killed:
            reason = "oom"
        elif self.exit_code in (126, 127) and (message := self._init_exec_failure(cid)):
            reason = "start_failed"  # the init could not exec the command: as Docker says without an init
        else:
            reason = "exited"
        self._end(reason=reason, exit_code=self.exit_code, message=message or self.stop_message)
        runner.remove(cid)

    def _init_exec_failure(self, cid: str) -> str:
        """Docker's init (tini) reports a command it cannot exec on stderr and exits 126/127: its message."""
        with contextlib.suppress(Exception):
            stream = self.ex.runner.logs(cid, follow=False)
            try:
                for kind, data in stream:
                    match = INIT_EXEC_FAILED.match(data.decode("utf-8", errors="replace"))
                    return match.group(1) if kind == "stderr" and match else ""
            finally:
                stream.close()
        return ""

    def _wait_exit(self, cid: str) -> None:
        """Wait for the container's exit (the engine's own event, not a sampled state), then classify it."""
        runner = self.ex.runner
        code, broken, delay = None, False, 0.2
        try:
            while not self.ex.closing.is_set():
                try:
                    code = runner.wait(cid)
                    break
                except ContainerGone:
                    break
                except RunnerUnavailable:
                    broken = True  # the engine went away under the wait (restart): look again when it answers
                    time.sleep(delay)
                    delay = min(delay * 2, 2.0)
                    with contextlib.suppress(RunnerUnavailable):
                        seen = runner.inspect(cid)
                        if seen is None or seen.finished or seen.removing:
                            break
                        broken = False  # it runs on (a passing error, or live-restore): its own exit will come
            state = None
            while not self.ex.closing.is_set():
                try:
                    state = runner.inspect(cid)
                    break
                except RunnerUnavailable:
                    time.sleep(1.0)
            self._exit = classify_exit(code=code, state=state, engine_restarted=broken)
        except Exception:  # noqa: BLE001 - never leave the attempt without an end
            self.ex.log.exception("attempt %s: waiting for the exit failed", self.attempt_id)
            self._exit = classify_exit(code=code, state=None, engine_restarted=True)
        finally:
            self._exited.set()
            self.shipper.wakeup.set()

    def _wait_for_output(self) -> None:
        """Sleep until output may be shipped (at once when it arrives after a quiet spell), at most LOOP_SECONDS."""
        due = self.shipper.due_in()
        if due is None:
            self.shipper.wakeup.wait(LOOP_SECONDS)
            self.shipper.wakeup.clear()
            due = self.shipper.due_in()
        if due:
            time.sleep(min(due, LOOP_SECONDS))

    def _read_attached(self, cid: str, attach) -> None:
        """The job's output from the attach made before its start: every byte, in order, until it ends (EOF).

        While the shipper's spool is full (control plane unreachable) this reader waits, so the engine blocks
        the job's writes, like a slow terminal: output is slowed, never lost. The cap closes the attach.
        """
        noting, early = False, False
        try:
            for stream, data in attach.frames():
                if not noting:
                    noting = True
                    threading.Thread(target=self._note_first_entry, args=(cid,), daemon=True).start()
                self.shipper.wait_for_room(self.ex.closing, self._stop_requested)
                if self.shipper.capped or self.ex.closing.is_set():
                    break
                if self._stop_requested.is_set() and self.shipper.spool_full(STOPPING_SPOOL_FACTOR):
                    # The engine cannot end a container whose attach is not read: a stopping job's last output
                    # is taken past the spool's bound, up to a point; past it the attach is closed, said so.
                    self.shipper.record_gap(STOPPED_UNREAD)
                    break
                self.shipper.feed(stream, data)
            else:
                # The attach ends with the container's output. One that ends while the container runs on (the
                # engine dropped it, or the job closed its stdout and stderr) hands over to the engine's log.
                early = not (self.shipper.capped or self.ex.closing.is_set() or self._exited.wait(ATTACH_EXIT_SECONDS))
                if early:
                    state = self.ex.runner.inspect(cid)
                    early = state is not None and state.status == "running"
        except Exception:  # noqa: BLE001 - the container ended or vanished; what was read is shipped
            self.ex.log.exception("attempt %s: reading the attached output failed", self.attempt_id)
        finally:
            attach.close()
        if early and not self.shipper.capped:
            self.ex.log.warning("attempt %s: the attach ended before the container: reading its log", self.attempt_id)
            self._read_logs(cid)
            return
        if not self.ex.closing.is_set():
            self.shipper.finish()
        self._reader_done.set()
        self.shipper.wakeup.set()

    def _note_first_entry(self, cid: str) -> None:
        """Keep the engine log's first timestamp in the record, once it is surely the job's first entry, so that a
        restarted agent can tell whether the engine still holds the log from its first byte (_engine_log_complete).

        The engine writes its copy just after handing the bytes to the attach: an empty log is looked at again.
        A log already too large to tell leaves nothing noted (the restarted agent then judges by size alone).
        """
        for _ in range(ANCHOR_TRIES):
            try:
                first, sure = self._engine_log_start(cid, whole=True, most_frames=ANCHOR_MOST_FRAMES)
            except Exception:  # noqa: BLE001 - only an aid to a later replay
                return
            if first is not None:
                if sure:
                    self._save(log_first_ts=first)
                return
            if self._reader_done.wait(ANCHOR_RETRY_SECONDS) or self.ex.closing.is_set():
                return

    def _engine_log_start(self, cid: str, *, whole: bool, most_frames: int | None = None) -> tuple[int | None, bool]:
        """(the engine log's first timestamp or None when it is empty, whether that is surely the job's first).

        `whole`: read on to tell, by size, whether json-file can have deleted anything (engine_log_never_rotated),
        stopping as soon as it holds too much to tell (or more than `most_frames`); else only the first frame is
        read (sure: False).
        """
        rotation = self.ex.runner.log_rotation(cid) if whole else None
        first, retained, frames = None, 0, 0
        stream = self.ex.runner.stamped_logs(cid, follow=False)
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

    def _engine_log_complete(self, cid: str) -> tuple[bool, int | None]:
        """(whether the engine's log surely still holds the job's first byte, its first timestamp).

        Surely: it starts at the first timestamp the attached reader noted, or it holds too little for json-file
        to have deleted anything.
        """
        noted = self.record.get("log_first_ts")
        first, sure = self._engine_log_start(cid, whole=not noted)
        if first is None:  # nothing held: complete only if nothing was read either
            return not self.shipper.took_any, noted
        if noted:
            return first == noted, first
        return sure, first

    def _read_logs(self, cid: str) -> None:
        """The engine's log (json-file), after an agent restart or when no attach could be made.

        It is read from its first byte and the shipper skips what it already spooled, when the engine still holds
        that first byte. When it does not (rotated away while no agent read), the spool no longer lines up with
        it: a gap is recorded and reading resumes from when the spooled output was read. A follow stream the
        engine ends (at a rotation) is reopened `since` its last frame; a reopened stream that no longer holds
        that frame records a gap too.
        """
        runner, cursor, finished = self.ex.runner, LogCursor(), False
        try:
            complete, first = False, None
            if self.shipper.resume_ends is not None:  # else a spool from an older agent: cannot line up
                complete, first = self._engine_log_complete(cid)
            gapped = not complete
            if gapped:
                self.shipper.record_gap(ROTATED)
                if self.shipper.read_at:
                    cursor.start_after(self.shipper.read_at)  # when the spooled output was read
            while not self.ex.closing.is_set() and not self.shipper.capped:
                replay = cursor.since is None and not gapped
                if replay:
                    self.shipper.rewind()  # from the first byte: the shipper skips what it already spooled
                cursor.reopen()
                # Once the container exited, one plain read from where the last stream stopped takes the rest.
                self._stream = runner.stamped_logs(cid, follow=not finished, since_ns=cursor.since)
                check_first = replay and first is not None
                for stream, ts, data in self._stream.stamped():
                    if check_first:
                        check_first = False
                        if ts != first:  # rotated away between the check and this stream
                            gapped = True
                            self.shipper.record_gap(ROTATED)
                    if not self._feed_engine(cursor, stream, cursor.take(ts, data, stream)):
                        break
                if self.shipper.capped or finished:
                    break
                state = runner.inspect(cid)
                if state is None or state.removing:
                    break
                finished = state.finished
        except Exception:  # noqa: BLE001 - the container ended or vanished; what was read is shipped
            self.ex.log.exception("attempt %s: reading logs failed", self.attempt_id)
        finally:
            if not self.ex.closing.is_set():
                self.shipper.finish()
            self._reader_done.set()
            self.shipper.wakeup.set()

    def _feed_engine(self, cursor: LogCursor, stream: str, data: bytes) -> bool:
        """Feed what the cursor took from the engine's log, after the gap it found if any; False once capped."""
        if cursor.rotated_away:
            cursor.rotated_away = False
            self.shipper.record_gap(ROTATED)
        if data:
            self.shipper.wait_for_room(self.ex.closing, self._stop_requested)
            self.shipper.feed(stream, data, read_at=cursor.last)  # the engine's stamp: where a later gap resumes
        return not self.shipper.capped

    def _drain_logs(self) -> None:
        delay = 0.05
        while not self.shipper.ship(force=True):
            self._check_closing()
            time.sleep(delay)
            delay = min(delay * 2, 2.0)

    def _send_logs(self, body: dict) -> dict:
        path = protocol.PATH_ATTEMPT_LOGS.format(attempt_id=self.attempt_id)
        return self.ex.call(path, body)

    # --- reports ----------------------------------------------------------------------------------
    def _report(self, body: dict) -> protocol.ReportReply:
        """Send a report until the server answers; a fenced answer raises Stale."""
        path = protocol.PATH_ATTEMPT_REPORT.format(attempt_id=self.attempt_id)
        delay = 0.1
        while True:
            self._check_closing()
            try:
                reply = protocol.ReportReply.model_validate(self.ex.call(path, body))
            except Unreachable:
                time.sleep(delay)
                delay = min(delay * 2, 3.0)
                continue
            except Refused as exc:
                if exc.status == 409:
                    raise Stale(exc.code) from None
                self.ex.log.warning("attempt %s: report refused: %s %s", self.attempt_id, exc.status, exc.code)
                return protocol.ReportReply(accepted=False)
            if reply.stop:
                raise Stale("stop")
            return reply

    def _end(self, *, reason: str, exit_code: int | None, message: str = "") -> None:
        body = {"state": "ended", "reason": reason, "exit_code": exit_code, "message": message[:2000]}
        if self.record.get("container_id"):
            body["container_id"] = self.record["container_id"][:128]
        with contextlib.suppress(Stale):
            self._report(body)
        self.ex.log.info("attempt %s ended: %s (exit %s)", self.attempt_id, reason, exit_code)
        self._forget()

    def _forget(self) -> None:
        with self._save_lock:
            self._forgotten = True
        self.shipper.remove_files()
        self.ex._forget_files(self.attempt_id)

    def _discard(self) -> None:
        self._stop_requested.set()  # a reader waiting for room lets go: the engine cannot stop an unread attach
        cid = self.record.get("container_id")
        if cid:
            self.ex.runner.stop(cid, grace=self.ex.stop_grace)
            self.ex.runner.remove(cid)
        self._forget()

    def _check_closing(self) -> None:
        if self.ex.closing.is_set():
            raise _Closing


class _Closing(Exception):
    """The agent is shutting down: leave the container and the spool for the next start."""
