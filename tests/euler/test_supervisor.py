"""The `make up` supervisor with stand-in children (shell loops), in a process of its own: the stop is bounded and
loud, later signals are ignored, and a supervisor killed with SIGKILL still takes children and grandchildren along."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from tests.e2e.harness import REPO

# Each child leaves a grandchild (`sleep`) in its process group, as celery's pool and uvicorn's workers do.
RUN = textwrap.dedent(
    """
    import sys
    from euler.supervisor import Supervisor

    sup = Supervisor(stop_timeout=float(sys.argv[1]))
    sup.spawn("polite", ["sh", "-c", "sleep 300 & wait"])
    sup.spawn("stubborn", ["sh", "-c", "trap '' TERM; sleep 300 & while :; do wait; done"])
    sup.started()  # as make up does before it prints its banner: a signal after "ready" is a plain stop
    print("ready", flush=True)
    sys.exit(sup.run())
    """
)


def start(stop_timeout: float) -> tuple[subprocess.Popen, list[psutil.Process]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", RUN, str(stop_timeout)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True,
    )  # fmt: skip
    lines = []
    while (line := proc.stdout.readline()) and "ready" not in line:
        lines.append(line)
    assert line, "".join(lines)
    sup = psutil.Process(proc.pid)
    deadline = time.monotonic() + 20
    while len(tree := [sup, *sup.children(recursive=True)]) < 6:  # supervisor, watchdog, 2 shells, 2 sleeps
        assert time.monotonic() < deadline, tree
        time.sleep(0.05)
    return proc, tree


def survivors(tree: list[psutil.Process]) -> list:
    _, alive = psutil.wait_procs(tree, timeout=15)
    return [(p.pid, p.cmdline()) for p in alive if p.status() != psutil.STATUS_ZOMBIE]


@pytest.mark.parametrize("signals", [[signal.SIGINT], [signal.SIGTERM, signal.SIGINT, signal.SIGHUP]])
def test_a_stop_signal_stops_every_child_within_the_bound_and_later_signals_are_ignored(signals):
    proc, tree = start(stop_timeout=1)
    os.killpg(proc.pid, signals[0])
    for sig in signals[1:]:
        time.sleep(0.2)
        os.kill(proc.pid, sig)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out
    assert survivors(tree) == []
    assert "stubborn" in out and "still running 1 s after SIGTERM" in out
    assert "Traceback" not in out and "KeyboardInterrupt" not in out
    for sig in signals[1:]:
        assert f"{signal.Signals(sig).name} ignored: already stopping" in out


def test_children_and_grandchildren_die_when_the_supervisor_is_killed_with_sigkill():
    proc, tree = start(stop_timeout=1)
    proc.kill()
    out, _ = proc.communicate(timeout=30)
    assert survivors(tree) == []
    assert "the supervisor is gone" in out
