"""How the agent stops a job's container: the one stop path, whoever asked (cancel, timeout, reclaim, preemption,
budget, drain, a fenced attempt). The reason goes to the container's /run/euler/stop (protocol.STOP_FILE), then
SIGTERM, then the `before_kill` hook (a checkpoint: it must be done by the kill time), then what is left of the
grace, then SIGKILL. The pure parts (the grace, the stop file's archive, the timeout warning's time) are plain
functions; `stop_container` drives the engine.
"""

from __future__ import annotations

import io
import logging
import tarfile
import threading
import time
from collections.abc import Callable

from nodeagent import protocol

log = logging.getLogger("euler.nodeagent.stop")


def grace_for(*, command: int | None, assignment: int | None, fallback: int) -> int:
    """The stop's grace: the stop command's, else the assignment's (the job's stop_grace_seconds), else the agent's
    fallback; never above protocol.MAX_STOP_GRACE_SECONDS, whatever a server sends."""
    for value in (command, assignment, fallback):
        if value is not None:
            return max(0, min(int(value), protocol.MAX_STOP_GRACE_SECONDS))
    return protocol.DEFAULT_STOP_GRACE_SECONDS


def stop_file_archive(word: str, *, under_run: bool) -> bytes:
    """A tar that puts `word` and a newline at /run/euler/stop: extracted at /run (`under_run`), or at / where the
    image has no /run. The word is one of protocol.STOP_WORDS' values (never anything a job wrote)."""
    data = f"{word}\n".encode()
    buf = io.BytesIO()
    now = int(time.time())
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        parts = ["euler"] if under_run else ["run", "run/euler"]
        for name in parts:
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, now
            tar.addfile(info)
        info = tarfile.TarInfo(f"{parts[-1]}/stop")
        info.size, info.mode, info.mtime = len(data), 0o644, now
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def warn_due(*, now: float, deadline: float | None, warn_before: int, warned: bool) -> bool:
    """Whether the timeout warning is to be sent now: once, `warn_before` seconds before the deadline."""
    return bool(deadline) and warn_before > 0 and not warned and now >= deadline - warn_before


def warn_signal(name: str) -> str | None:
    """The signal a job asked for as its warning, if it is one the agent sends (protocol.WARN_SIGNALS)."""
    name = (name or "").upper()
    return name if name in protocol.WARN_SIGNALS else None


def stop_container(
    runner,
    cid: str,
    *,
    reason: str,
    grace: int,
    exited: threading.Event | None,
    before_kill: Callable[[str, str, float], None] | None = None,
    attempt_id: int | None = None,
) -> None:
    """The stop: the reason in /run/euler/stop, SIGTERM, `before_kill(cid, reason, kill_at)` (kill_at: a
    time.monotonic() instant), the rest of the grace, SIGKILL. `exited`: set once the container has exited (its
    exit waiter); None: Docker's stop waits for the rest instead (a second SIGTERM, then SIGKILL)."""
    kill_at = time.monotonic() + grace
    try:
        runner.write_stop_file(cid, protocol.stop_word(reason))
    except Exception as exc:  # noqa: BLE001 - the file is a courtesy: the stop goes on without it
        log.info("attempt %s: the stop file could not be written: %s", attempt_id, exc)
    runner.signal(cid, "SIGTERM")
    if before_kill is not None:
        try:
            before_kill(cid, reason, kill_at)
        except Exception:  # noqa: BLE001 - a hook's failure never holds the stop
            log.exception("attempt %s: the before-kill step failed", attempt_id)
    left = max(0.0, kill_at - time.monotonic())
    if exited is None:
        runner.stop(cid, grace=int(left + 0.999))
        return
    if not exited.wait(left):
        log.info("attempt %s: still running after its %s s grace: SIGKILL", attempt_id, grace)
        runner.signal(cid, "SIGKILL")
