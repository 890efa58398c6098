"""One attempt on this host, driven by its owner thread: start, report, ship logs, stop, end, remove.

The owner thread is the only one that moves the attempt's phase (the table: nodeagent/attempt_phase.py) and the
only one that writes its record. The other threads signal it through its inbox: the output reader (the output
ended, the engine log's first timestamp: nodeagent/attempt_logs.py), the exit waiter (how the container ended:
nodeagent/attempt_exit.py), the heartbeat and the poll (stop), the disk guard (past its limit). Reports are
`protocol.AttemptReport`s, validated before they are sent (the record and reports: nodeagent/attempt_record.py).

Other features attach at the hooks (`_before_create`, `_before_start`, `_after_start`, `_before_kill`,
`_after_exit`, `_on_finish`), which do nothing here.

Every stop (cancel, timeout, reclaim, preemption, budget, a fenced attempt) takes one path,
nodeagent/attempt_stop.py: the reason in /run/euler/stop, SIGTERM, `_before_kill`, the rest of the attempt's grace
(the stop command's, else its assignment's `stop_grace_seconds`), SIGKILL. A timeout warning (`warn_signal`,
`warn_before_timeout_seconds` ahead) is sent once, from the same loop that enforces the deadline.
"""

from __future__ import annotations

import contextlib
import threading
import time

from nodeagent import attempt_stop, checkpoint, protocol
from nodeagent.attempt_exit import NEVER_STARTED, VANISHED, Exit, end_reason, init_exec_failure, wait_for_exit
from nodeagent.attempt_logs import OutputReader
from nodeagent.attempt_phase import TERMINAL, WIRE_STATE, Phase, advance, wire_state
from nodeagent.attempt_record import AttemptRecord
from nodeagent.attempt_signals import Exited, FirstEntry, Inbox, OutputEnded, StopAsked
from nodeagent.attempt_spans import Spans
from nodeagent.attempt_start import AttemptStart
from nodeagent.logship import LogShipper, Stale
from nodeagent.outputs import hooks as outputs

LOOP_SECONDS = 0.05
# The `ended` report's reason for a stop asked for this reason (anything else: cancelled).
REASONS = {
    "timeout": "timeout",
    "cancelled": "cancelled",
    "disk_limit": "disk_limit",
    "gpu_error": "gpu_error",
    "reclaim": "reclaimed",
    "preempt": "preempted",
    "quota_exceeded": "quota_exceeded",
    "window_closed": "window_closed",
}


class AttemptRun(AttemptStart, AttemptRecord):
    def __init__(self, executor, record: dict, *, assignment: protocol.Assignment | None):
        self.ex = executor
        self.record = record
        self.attempt_id = int(record["attempt_id"])
        self.assignment = assignment  # holds the env: kept in memory only, never written or logged
        # Owner-only state: the phase and what it learnt from the signals.
        self.phase = Phase.CREATED
        self._wire = wire_state(Phase.CREATED)
        self.exit_code: int | None = None
        self.stop_reason: str | None = None
        self.stop_asked_reason = ""  # the stop's reason as asked (the word in /run/euler/stop)
        self.stop_message = ""
        self.stop_grace: int | None = None  # the stop command's grace
        self._waiting_exit = False  # the exit waiter runs: `exited` will be set
        self.stale = False
        self._exit: Exit | None = None
        self._output_ended = False
        self._forgotten = False
        self._attach = None  # the attach made before the start, until a reader takes it
        self.reader: OutputReader | None = None
        # Facts other threads wait on: a stop was asked (a reader waiting for room lets go: the engine cannot
        # stop a container whose attach is not read); the container exited (an attach that ended early checks).
        self.stop_asked = threading.Event()
        self.exited = threading.Event()
        self.thread = threading.Thread(target=self._main, daemon=True, name=f"euler-attempt-{self.attempt_id}")
        self.shipper = LogShipper(
            attempt_id=self.attempt_id,
            spool_dir=self.ex.spool_dir,
            send=self._send_logs,
            max_spool_bytes=self.ex.max_spool_bytes,
            flush_seconds=self.ex.log_flush_seconds,
        )
        self.inbox = Inbox(self.shipper.wakeup)
        self.spans = Spans()  # the start path, timed (nodeagent/attempt_spans.py)
        self._made = False  # the start's create succeeded (nodeagent/attempt_start.py)

    # --- called from other threads ---------------------------------------------------------------
    def running_attempt(self) -> protocol.RunningAttempt:
        return protocol.RunningAttempt(
            attempt_id=self.attempt_id,
            state=wire_state(self.phase, self._wire),
            container_id=self.record.get("container_id", "")[:128],
            exit_code=self.exit_code,
        )

    def request_stop(self, reason: str, message: str = "", grace: int | None = None) -> None:
        self.inbox.put(StopAsked(reason, message, grace))
        self.stop_asked.set()

    def disk_exceeded(self, message: str) -> None:
        """From the disk guard, which already killed the container: the attempt ends `disk_limit`."""
        self.request_stop("disk_limit", message)

    def gpu_failed(self, message: str) -> None:
        """From the GPU watch: a GPU this attempt holds turned unhealthy; it ends `gpu_error` (nodeagent/gpuwatch.py)."""
        self.request_stop("gpu_error", message)

    def close_reader(self) -> None:
        """Stop reading the job's output (cap reached, agent closing). Closing an attach releases the job's writes."""
        reader = self.reader
        stream = reader.stream if reader is not None else self._attach
        if stream is not None:
            stream.close()

    # --- hooks: where other features attach (each does nothing here) ------------------------------
    def _before_create(self) -> str | None:
        """Before the container is created (fresh attempts only): why this node cannot run it, or None."""
        return None

    def _before_start(self, cid: str) -> None:
        """The container is created (and attached), not started: place what it needs. RunnerError fails the start."""
        outputs.place_inputs(self, cid)  # the job's inputs_from files (nodeagent/outputs/)
        checkpoint.restore(self, cid)  # the job's latest committed checkpoint (nodeagent/checkpoint.py)

    def _after_start(self, cid: str) -> None:
        """The container runs (or ran: adopted after a restart); its output is being read."""
        self.ex.watch_gpus(self)  # GPU health and per-job figures (nodeagent/gpuwatch.py)
        checkpoint.start_periodic(self, cid)  # every interval while it runs (nodeagent/checkpoint.py)

    def _before_kill(self, cid: str, reason: str, kill_at: float) -> None:
        """A stop asked (`reason` as the server or the agent said it): the container has its stop file and SIGTERM and
        may still run; this returns by `kill_at` (time.monotonic()), when it gets SIGKILL whatever this does. Runs
        on the stop's own thread (nodeagent/attempt_stop.py), beside the owner thread shipping the job's output."""

    def _after_exit(self, cid: str, exit_: Exit) -> dict:
        """The container ended on its own or was stopped (not vanished), its output shipped: extra fields of the
        `ended` report (protocol.AttemptReport), sent next."""
        extra = {"gpu_stats": self.ex.gpu_stats(self.attempt_id)}
        try:
            checkpoint.upload_checkpoint(self, cid, "stop")  # ckpt: checkpoint at stop (the container has stopped)
            extra.update(outputs.collect_and_upload(self, cid))  # the job's outputs (nodeagent/outputs/)
        except outputs.Interrupted:
            raise _Closing from None
        return extra

    def _on_finish(self) -> None:
        """The owner thread is done, whatever the phase it ended in (`self.phase`)."""
        checkpoint.stop_periodic(self)

    # --- the owner thread --------------------------------------------------------------------------
    def _move(self, to: Phase) -> None:
        self.phase = advance(self.phase, to)
        self._wire = WIRE_STATE.get(to, self._wire)

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
            self._move(Phase.LEFT)
        except Exception:  # noqa: BLE001 - one attempt's failure must not take the agent down
            log.exception("attempt %s failed in the executor", self.attempt_id)
            if self.phase not in TERMINAL:
                self._move(Phase.FAILED)
        finally:
            if self._attach is not None and self.reader is None:
                self._attach.close()  # never read: an unread attach would hold the job's writes
            try:
                self._on_finish()
            finally:
                self.ex._finished(self)

    def _take_signals(self) -> None:
        for signal in self.inbox.take():
            if isinstance(signal, StopAsked):
                self._stop(signal.reason, signal.message, signal.grace)
            elif isinstance(signal, OutputEnded):
                self._output_ended = True
            elif isinstance(signal, Exited):
                self._exit = signal.exit
            elif isinstance(signal, FirstEntry):
                self._save(log_first_ts=signal.ts)

    def _stop(self, reason: str, message: str = "", grace: int | None = None) -> None:
        """The first reason asked is the one reported; a fenced attempt is discarded at the next check."""
        if reason == "stale_attempt":
            self.stale = True
        if self.stop_reason is None:
            self.stop_reason = REASONS.get(reason, "cancelled")
            self.stop_asked_reason = reason
            self.stop_message = message
            self.stop_grace = grace
        self.stop_asked.set()

    def grace(self) -> int:
        """This attempt's stop grace: the stop command's, else its job's (the assignment, or the record when
        adopted), else the agent's fallback."""
        assigned = self.assignment.stop_grace_seconds if self.assignment is not None else self.record.get("stop_grace")
        return attempt_stop.grace_for(command=self.stop_grace, assignment=assigned, fallback=self.ex.stop_grace)

    def _stop_container(self, cid: str, reason: str) -> None:
        """The one stop path (nodeagent/attempt_stop.py), on a thread of its own."""
        attempt_stop.stop_container(
            self.ex.runner,
            cid,
            reason=reason,
            grace=self.grace(),
            exited=self.exited if self._waiting_exit else None,
            before_kill=self._before_kill,
            attempt_id=self.attempt_id,
        )

    def _warn(self, cid: str) -> None:
        """The timeout warning, once (the record says it was sent: an adopting agent does not send it again)."""
        name = self.assignment.warn_signal if self.assignment is not None else self.record.get("warn_signal", "")
        sig = attempt_stop.warn_signal(name)
        self._save(warned=True)
        if sig is None:
            return
        self.ex.log.info("attempt %s: %s s before its timeout: %s", self.attempt_id, self._warn_before(), sig)
        threading.Thread(
            target=self.ex.runner.signal, args=(cid, sig), daemon=True, name=f"euler-warn-{self.attempt_id}"
        ).start()

    def _warn_before(self) -> int:
        if self.assignment is not None:
            return int(self.assignment.warn_before_timeout_seconds)
        return int(self.record.get("warn_before", 0) or 0)

    def _follow(self, *, fresh: bool) -> None:
        runner, cid = self.ex.runner, self.record["container_id"]
        if fresh:
            self._move(Phase.RUNNING)  # just started: the exit, if any, is read after the log ends
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
            self._move(Phase.EXITED if state.finished else Phase.RUNNING)
        # The reader starts before the `running` report: an attached job must not wait for the control plane
        # to answer it (the reader only spools; shipping starts in the loop below).
        if self.shipper.capped:
            self._output_ended = True  # the log was full before a restart: nothing more to read
            if self._attach is not None:
                self._attach.close()
        else:
            self.reader = self._reader(cid)
            self.reader.start()
        # The exit is waited for from now on: a short job's end is known by the time the control plane answers.
        self._waiting_exit = True
        threading.Thread(target=self._wait_exit, args=(cid,), daemon=True, name=f"euler-exit-{self.attempt_id}").start()
        if not self.record.get("running_reported"):
            if fresh:
                self.spans.mark("readers")
            self._report(
                protocol.AttemptReport(state="running", container_id=cid, runtime=self.record.get("runtime", ""))
            )
            self._save(running_reported=True)
            if fresh:
                self.spans.mark("reported")
                self.spans.log(self.ex.log, self.attempt_id)
        self.ex.watch_disk(self, cid, fresh=fresh)  # until the run finishes (Executor._finished)
        self._after_start(cid)
        self._run_until_exit(cid)
        self.spans.mark("exit")
        exit_ = self._exit
        self.exit_code = exit_.code
        if self.phase is not Phase.EXITED:
            self._move(Phase.EXITED)
        self._drain_logs()
        self.spans.mark("drained")
        self._take_signals()
        if self.stale:
            raise Stale("stale_attempt")
        if exit_.vanished:
            self.ex.log.warning("attempt %s: %s", self.attempt_id, exit_.message)
            self._end(reason="lost", exit_code=None, message=exit_.message)
            with contextlib.suppress(Exception):  # after an engine restart it is still there, exited
                runner.remove(cid)
            return
        extra = self._after_exit(cid, exit_)
        unexecuted = "" if self.stop_reason or exit_.oom_killed else init_exec_failure(runner, cid, exit_.code)
        reason, message = end_reason(
            exit_, stop_reason=self.stop_reason, stop_message=self.stop_message, init_failure=unexecuted
        )
        self.spans.mark("collected")
        self._end(reason=reason, exit_code=self.exit_code, message=message, **extra)
        self.spans.mark("ended")
        if fresh:
            self.spans.log(self.ex.log, self.attempt_id, "end", since="reported")
        runner.remove(cid)

    def _reader(self, cid: str) -> OutputReader:
        return OutputReader(
            runner=self.ex.runner,
            cid=cid,
            shipper=self.shipper,
            attach=self._attach,
            log_first_ts=self.record.get("log_first_ts"),
            closing=self.ex.closing,
            stop_asked=self.stop_asked,
            exited=self.exited,
            first_entry=lambda ts: self.inbox.put(FirstEntry(ts)),
            done=lambda: self.inbox.put(OutputEnded()),
            log=self.ex.log,
            attempt_id=self.attempt_id,
        )

    def _run_until_exit(self, cid: str) -> None:
        """Ship output as it comes, enforce the deadline, stop on request, until the output ended and the exit
        is known."""
        deadline = self.record.get("deadline")
        while True:
            self._take_signals()
            if self._output_ended and self._exit is not None:
                return
            self._check_closing()
            # An adopted container found already exited ended as it ended, even if its deadline passed while no
            # agent watched: its exit code is the report, never `timeout`.
            if deadline and time.time() >= deadline and not self.stop_asked.is_set() and self.phase is not Phase.EXITED:
                self._stop("timeout")
            elif self.phase is Phase.RUNNING and attempt_stop.warn_due(
                now=time.time(), deadline=deadline, warn_before=self._warn_before(), warned=self.record.get("warned")
            ):
                self._warn(cid)
            if self.stop_reason is not None and self.phase is Phase.RUNNING:
                self._move(Phase.STOPPING)
                threading.Thread(
                    target=self._stop_container,
                    args=(cid, self.stop_asked_reason or "cancelled"),
                    daemon=True,
                    name=f"euler-stop-{self.attempt_id}",
                ).start()
            if self.stale:
                raise Stale("stale_attempt")
            if self.shipper.capped and not self._output_ended:
                self.close_reader()  # the server keeps no more: stop reading, wait for the exit only
            self.shipper.ship()
            self._wait_for_output()

    def _wait_exit(self, cid: str) -> None:
        """The exit waiter's thread: block until the container ends, then tell the owner how."""
        exit_ = wait_for_exit(
            self.ex.runner, cid, closing=self.ex.closing, log=self.ex.log, attempt_id=self.attempt_id,
            stopping=self.stop_asked,
        )  # fmt: skip
        self.inbox.put(Exited(exit_))
        self.exited.set()

    def _wait_for_output(self) -> None:
        """Sleep until output may be shipped (at once when it arrives after a quiet spell) or a signal comes, at
        most LOOP_SECONDS."""
        due = self.shipper.due_in()
        if due is None:
            self.inbox.event.wait(LOOP_SECONDS)
            self.inbox.event.clear()
            due = self.shipper.due_in()
        if due:
            time.sleep(min(due, LOOP_SECONDS))

    def _check_closing(self) -> None:
        if self.ex.closing.is_set():
            raise _Closing


class _Closing(Exception):
    """The agent is shutting down: leave the container and the spool for the next start."""
