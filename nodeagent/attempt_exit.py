"""How one attempt's container ended: the engine's wait, classified (pure), and tini's exec failure read back."""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
from dataclasses import dataclass, replace

from nodeagent.docker_runner import ContainerGone, ContainerState, RunnerUnavailable
from nodeagent.kernel_oom import kernel_reports_oom_kill

INIT_EXEC_FAILED = re.compile(r"\[FATAL tini \(\d+\)\] (exec .* failed: .*)")
VANISHED = "the container disappeared: removed outside the agent (docker rm -f) or lost by the Docker engine"
NEVER_STARTED = "the node agent restarted between creating the container and starting it; the attempt is retried"


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


SIGKILL_EXIT = 128 + 9
# The engine misses OOM kills: containerd before 2.2 watches a container's memory cgroup only once its start
# returned (containerd/containerd#8180, fixed by #12405), and drops a notification whose cgroup is gone before it
# looks (a loaded host). The kernel's log (nodeagent.kernel_oom) has them all, when the agent may read it.
UNREPORTED_KILL = (
    "killed by SIGKILL (exit 137), not by Euler: the job's own kill, or the kernel's OOM killer at the job's memory "
    "limit that neither the engine nor the kernel's log (readable by an agent running as root) reported; raise the "
    "memory limit if the job needs more"
)
OOM_EVENT_WAIT = 3.0  # seconds: how long a SIGKILLed container's `oom` event may trail its exit


def maybe_oom(exit_: Exit, *, stopping: threading.Event | None) -> bool:
    """Whether an exit may be an OOM kill whose engine event has not arrived yet (pure): killed by SIGKILL,
    not flagged OOM, and no stop of ours sent that signal."""
    return exit_.code == SIGKILL_EXIT and not exit_.oom_killed and not (stopping is not None and stopping.is_set())


def wait_for_exit(
    runner,
    cid: str,
    *,
    closing: threading.Event,
    log: logging.Logger,
    attempt_id: int,
    stopping: threading.Event | None = None,
    kernel_oom=kernel_reports_oom_kill,
) -> Exit:
    """Wait for the container's exit (the engine's own event, not a sampled state), then classify it.

    A SIGKILL that no stop of ours sent may be the kernel's OOM kill that the engine did not flag: containerd
    drops the notification when the container's cgroup is gone before it looks (a loaded host), and gVisor's
    shim reports it after the sandbox died. The kernel's own log is asked first (`kernel_oom`: True, False, or
    None when it cannot be read), then the engine's `oom` event is waited for, up to OOM_EVENT_WAIT. Blocks (the
    attempt's waiter thread runs it and signals the owner with the result); never raises.
    """
    exit_ = _wait_for_exit(runner, cid, closing=closing, log=log, attempt_id=attempt_id)
    if not maybe_oom(exit_, stopping=stopping):
        return exit_
    try:
        if kernel_oom(cid):
            return replace(exit_, oom_killed=True)
    except Exception:  # noqa: BLE001 - the engine is asked next
        log.warning("attempt %s: the kernel's log could not be read", attempt_id)
    if hasattr(runner, "oom_event"):
        try:
            if runner.oom_event(cid, within=OOM_EVENT_WAIT):
                return replace(exit_, oom_killed=True)
        except Exception:  # noqa: BLE001 - the exit as read stands
            log.warning("attempt %s: the engine's oom events could not be read", attempt_id)
    return exit_


def _wait_for_exit(runner, cid: str, *, closing: threading.Event, log: logging.Logger, attempt_id: int) -> Exit:
    code, broken, delay = None, False, 0.2
    try:
        while not closing.is_set():
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
        while not closing.is_set():
            try:
                state = runner.inspect(cid)
                break
            except RunnerUnavailable:
                time.sleep(1.0)
        return classify_exit(code=code, state=state, engine_restarted=broken)
    except Exception:  # noqa: BLE001 - never leave the attempt without an end
        log.exception("attempt %s: waiting for the exit failed", attempt_id)
        return classify_exit(code=code, state=None, engine_restarted=True)


def end_reason(exit_: Exit, *, stop_reason: str | None, stop_message: str, init_failure: str) -> tuple[str, str]:
    """The `ended` report's reason and message for a container that did not vanish: a stop asked (cancel,
    timeout, disk limit) first, then an OOM kill, then a command the init could not exec, else a plain exit."""
    if stop_reason:
        return stop_reason, stop_message
    if exit_.oom_killed:
        return "oom", stop_message
    if init_failure:
        return "start_failed", init_failure  # the init could not exec the command: as Docker says without an init
    if exit_.code == SIGKILL_EXIT and not stop_message:
        return "exited", UNREPORTED_KILL
    return "exited", stop_message


def init_exec_failure(runner, cid: str, code: int | None) -> str:
    """Docker's init (tini) reports a command it cannot exec on stderr and exits 126/127: its message ("" for
    other exit codes, without reading the log)."""
    if code not in (126, 127):
        return ""
    with contextlib.suppress(Exception):
        stream = runner.logs(cid, follow=False)
        try:
            for kind, data in stream:
                match = INIT_EXEC_FAILED.match(data.decode("utf-8", errors="replace"))
                return match.group(1) if kind == "stderr" and match else ""
        finally:
            stream.close()
    return ""
