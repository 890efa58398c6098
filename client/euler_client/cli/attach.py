"""After the submit of `euler run`: follow the job (progress on stderr, its streams on ours, Ctrl-C to cancel)
and exit with its code. Click-free, so that the fast path of `euler run` (cli/runargs.py) uses it too."""

from __future__ import annotations

import _signal  # the C module under `signal`, whose enums cost ~0.6 ms of the CLI's start-up
import sys
import time

from euler_client.cli.output import emit_json, note
from euler_client.errors import EXIT_INTERRUPTED, Conflict
from euler_client.jobrequest import RunRequest
from euler_client.parse import exit_status

PENDING_REFRESH_S = 2.0  # how often `run` re-reads a queued job's pending reason, for display only


def run_job(client, request: RunRequest) -> int:
    """Submit the request's job and follow it as asked; the exit status of `euler run`."""
    job = client.jobs.submit(request.body())
    if request.array_count is not None:
        return follow_array(client, job, request)
    if request.detach:
        emit_json(job) if request.as_json else print(job["id"])
        return 0
    if request.as_json:
        ended = client.jobs.wait(job["id"])
        emit_json(ended)
        return exit_status(ended)[0]
    return Attach(client, job, quiet=request.quiet).run()


def follow_array(client, arr: dict, request: RunRequest) -> int:
    """`euler run --array N`: the array's id, then (unless detached) its counts on stderr as they change until
    every task ended; exit 0 when all succeeded, 1 otherwise (a task's own output: `euler logs TASK`)."""
    if request.detach:
        emit_json(arr) if request.as_json else print(arr["id"])
        return 0

    def show(a: dict) -> None:
        if not request.quiet:
            c = a.get("counts") or {}
            note(f"array {a['id']}: {a.get('state')}; " + ", ".join(f"{n} {s}" for s, n in c.items() if n))

    try:
        ended = client.arrays.wait(arr["id"], on_change=show)
    except KeyboardInterrupt:
        note(f"cancelling array {arr['id']}")
        ended = client.arrays.cancel(arr["id"])
    emit_json(ended) if request.as_json else print(arr["id"])
    return 0 if ended.get("state") == "succeeded" else 1


class Attach:
    """`euler run` after the submit: progress on stderr, the job's streams on ours, Ctrl-C to cancel."""

    def __init__(self, client, job: dict, *, quiet: bool = False):
        self.client, self.job, self.quiet = client, job, quiet
        self.job_id = job["id"]
        self.interrupts = 0
        self.cancel_sent = False
        self.shown: tuple = ()
        self.pending_read_at = time.monotonic()

    def say(self, message: str) -> None:
        if not self.quiet:
            note(message)

    def announce(self, job: dict) -> None:
        """One line per change of state (and of pending reason while queued)."""
        state = job.get("state")
        node = (job.get("attempts") or [{}])[-1].get("node") if state in ("assigned", "running") else None
        key = (state, job.get("pending_reason") if state == "queued" else node)
        if key == self.shown:
            return
        self.shown = key
        if state == "queued":
            reason = job.get("pending_reason")
            self.say(f"job {self.job_id} queued" + (f": {reason}" if reason else ""))
        elif state == "assigned":
            self.say(f"job {self.job_id} assigned to node {node}")
        elif state == "running":
            self.say(f"job {self.job_id} running on node {node}")

    def _on_sigint(self, signum, frame) -> None:
        self.interrupts += 1
        if self.interrupts >= 2:
            raise _Detach

    def run(self) -> int:
        self.say(f"job {self.job_id} submitted")
        previous = _signal.signal(_signal.SIGINT, self._on_sigint)
        try:
            return self._follow()
        except _Detach:
            note(f"detached; job {self.job_id} keeps running (euler logs -f {self.job_id}, euler cancel {self.job_id})")
            return EXIT_INTERRUPTED
        finally:
            _signal.signal(_signal.SIGINT, previous)

    def _follow(self) -> int:
        out, err = sys.stdout.buffer, sys.stderr.buffer
        for message in self.client.jobs.stream(self.job_id, tick=0.2):
            if self.interrupts and not self.cancel_sent:
                self.cancel_sent = True
                note(f"cancelling job {self.job_id} (Ctrl-C again to detach)")
                try:
                    self.client.jobs.cancel(self.job_id)
                except Conflict:
                    pass  # it ended meanwhile
            kind = message.get("type") if message else None
            if kind == "log":
                stream = err if message["stream"] == "stderr" else out
                stream.write(message["data"].encode("utf-8", "replace"))
                stream.flush()
            elif self.quiet and kind in ("connected", "state"):
                continue  # progress is only shown: no need to read the job
            elif kind == "connected":
                continue  # the server tells where the job stands next (a `state` message), then each move
            elif kind == "state" and (message.get("node") or "pending_reason" in message):
                # Where it runs, or why it waits (the first message after connecting): no need to read the job.
                node, reason = message.get("node"), message.get("pending_reason")
                self.announce({"state": message.get("state"), "pending_reason": reason, "attempts": [{"node": node}]})
                self.pending_read_at = time.monotonic()
            elif kind == "state":
                if message.get("state") == "queued":
                    self.shown = ()  # queued again (a retry): shown again, with its reason read from the job
                self.announce(self.client.jobs.get(self.job_id))
                self.pending_read_at = time.monotonic()
            elif kind == "attempt":
                self.say(f"job {self.job_id}: attempt {message.get('attempt')} started")
            elif kind == "end":
                if message.get("state") == "succeeded":  # exit 0: no need to read the job again
                    self.say(f"job {self.job_id} succeeded")
                    return 0
                break
            elif message is None and not self.quiet and self.shown[:1] == ("queued",):
                if time.monotonic() - self.pending_read_at >= PENDING_REFRESH_S:
                    self.pending_read_at = time.monotonic()
                    self.announce(self.client.jobs.get(self.job_id))
        ended = self.client.jobs.get(self.job_id)
        code, why = exit_status(ended)
        if why:
            note(why)
        elif ended.get("state") == "succeeded":
            self.say(f"job {self.job_id} succeeded")
        else:
            self.say(f"job {self.job_id} {ended.get('state')} (exit {code})")
        return code


class _Detach(BaseException):
    """The second Ctrl-C: leave the job running."""
