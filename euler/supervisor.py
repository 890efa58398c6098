"""The `make up` supervisor: runs each child in a process group it owns and stops them all, however it is stopped.

- The first SIGINT, SIGTERM or SIGHUP starts an orderly stop (SIGTERM to every child's leader at once, Redis
  after the others, which need it to shut down); later signals are reported and ignored, never raised into it.
- The stop has a bound: a group still alive after it gets SIGKILL, and the supervisor says so.
- Killed itself (kill -9), the supervisor still takes its children along: each child gets SIGTERM from the
  kernel (PR_SET_PDEATHSIG), and a watchdog process that holds the other end of a pipe stops every
  group it was told about, grandchildren included, with the same bound.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

BASE = Path(__file__).resolve().parent.parent
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
STOPPED_LAST = frozenset({"redis"})  # the others need it while they shut down
REDIS_STOP_TIMEOUT = 5.0
PR_SET_PDEATHSIG = 1

try:
    _libc = ctypes.CDLL("libc.so.6", use_errno=True)
except OSError:  # not glibc Linux: the watchdog alone covers a killed supervisor
    _libc = None


def _say(msg: str) -> None:
    print(f"[euler] {msg}", flush=True)


def _die_with(parent_pid: int):
    """preexec_fn: the child gets SIGTERM when the supervisor dies, even if that happened during the fork."""

    def preexec() -> None:
        if _libc is not None:
            _libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent_pid:
            os.kill(os.getpid(), signal.SIGTERM)

    return preexec


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _killpg(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


class Supervisor:
    """Create it, and spawn children, from the main thread: PR_SET_PDEATHSIG follows the spawning thread."""

    def __init__(self, *, stop_timeout: float = 10.0) -> None:
        if threading.current_thread() is not threading.main_thread():
            raise RuntimeError("the supervisor must run in the main thread")
        self.children: dict[str, subprocess.Popen] = {}
        self.stop_timeout = stop_timeout
        self.stop_signal: int | None = None
        self._signals: list[int] = []
        self._reported = 0
        self._starting = True
        self._wake_r, wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)
        for sig in STOP_SIGNALS:
            signal.signal(sig, self._on_signal)
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)  # wakes the loop when a child exits
        self._watchdog, self._watch = self._start_watchdog()

    # --- signals ----------------------------------------------------------------------------------
    def _on_signal(self, signum: int, frame) -> None:
        self._signals.append(signum)
        if self.stop_signal is None:
            self.stop_signal = signum
            if self._starting:  # abort start-up (migrate, redis); the caller then calls stop_all()
                raise KeyboardInterrupt

    def _wait_event(self, timeout: float) -> None:
        """Sleep until a signal (SIGCHLD included) arrives or `timeout` passes."""
        with contextlib.suppress(InterruptedError):
            select.select([self._wake_r], [], [], max(0.0, timeout))
        with contextlib.suppress(BlockingIOError):
            while os.read(self._wake_r, 512):
                pass

    def _report_ignored(self, deadline: float) -> None:
        for signum in self._signals[self._reported :]:
            left = max(0.0, deadline - time.monotonic())
            _say(f"{signal.Signals(signum).name} ignored: already stopping (what still runs in {left:.0f} s is killed)")
        self._reported = len(self._signals)

    # --- the watchdog -----------------------------------------------------------------------------
    def _start_watchdog(self):
        read_end, write_end = os.pipe()
        script = Path(__file__).with_name("watchdog.py")
        proc = subprocess.Popen(
            [sys.executable, "-I", str(script), str(read_end), str(self.stop_timeout)],
            pass_fds=(read_end,), stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        os.close(read_end)
        return proc, os.fdopen(write_end, "w", buffering=1, encoding="ascii")

    def _tell_watchdog(self, line: str) -> None:
        with contextlib.suppress(OSError, ValueError):
            self._watch.write(line + "\n")

    def _release_watchdog(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self._watch.close()
        try:
            self._watchdog.wait(timeout=self.stop_timeout + 5)
        except subprocess.TimeoutExpired:
            self._watchdog.kill()
            self._watchdog.wait()

    # --- children ---------------------------------------------------------------------------------
    def spawn(self, name: str, argv: list[str], env: dict | None = None) -> subprocess.Popen:
        if threading.current_thread() is not threading.main_thread():
            raise RuntimeError("spawn children from the main thread (PR_SET_PDEATHSIG follows the thread)")
        proc = subprocess.Popen(
            argv, cwd=BASE, env=env or os.environ.copy(), stdin=subprocess.DEVNULL,
            start_new_session=True, preexec_fn=_die_with(os.getpid()),
        )  # fmt: skip
        self.children[name] = proc
        self._tell_watchdog(f"+{proc.pid}")
        _say(f"started {name} (pid {proc.pid})")
        return proc

    def _stop_groups(self, names: list[str], bound: float) -> None:
        """SIGTERM to each child, wait up to `bound` for them, then SIGKILL whatever is left in their groups."""
        for name in names:  # the leader only: it stops its own children (celery's pool) in order
            if self.children[name].poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    self.children[name].send_signal(signal.SIGTERM)
        deadline = time.monotonic() + bound
        while any(self.children[n].poll() is None for n in names) and time.monotonic() < deadline:
            self._report_ignored(deadline)
            self._wait_event(deadline - time.monotonic())
        self._report_ignored(deadline)
        for name in names:
            proc = self.children[name]
            if proc.poll() is None:
                _say(f"killed {name} (pid {proc.pid}): still running {bound:.0f} s after SIGTERM")
                _killpg(proc.pid, signal.SIGKILL)
            elif group_alive(proc.pid):
                _say(f"killed what {name} (pid {proc.pid}) left running in its process group")
                _killpg(proc.pid, signal.SIGKILL)
        for name in names:
            proc = self.children[name]
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
            if not group_alive(proc.pid):
                self._tell_watchdog(f"-{proc.pid}")

    def stop_all(self) -> None:
        """The orderly stop; bounded, and deaf to further signals. Safe to call more than once."""
        self._starting = False
        self._reported = len(self._signals)  # those started the stop; any later one is reported as ignored
        first = [n for n in self.children if n not in STOPPED_LAST]
        last = [n for n in self.children if n in STOPPED_LAST]
        self._stop_groups(first, self.stop_timeout)
        self._stop_groups(last, min(self.stop_timeout, REDIS_STOP_TIMEOUT))
        self._release_watchdog()

    def _exited(self) -> tuple[str, int] | None:
        for name, proc in self.children.items():
            code = proc.poll()
            if code is not None:
                return name, code
        return None

    def started(self) -> None:
        """Start-up is over: from now on a stop signal is only recorded, and run() stops in order (no exception
        can surface between the end of start-up and run())."""
        self._starting = False

    def run(self) -> int:
        """Wait until a stop signal arrives (exit 0) or a child exits (stop the rest, exit non-zero)."""
        self.started()
        while self.stop_signal is None:
            exited = self._exited()
            if exited is not None:
                name, code = exited
                _say(f"{name} exited with code {code}; stopping everything")
                self.stop_all()
                return code or 1
            self._wait_event(30.0)
        _say(
            f"{signal.Signals(self.stop_signal).name}: stopping… (further signals are ignored;"
            f" what still runs after {self.stop_timeout:.0f} s is killed)"
        )
        self.stop_all()
        _say("stopped")
        return 0
