"""How a container's run ended, from the engine's wait result and one inspect after it (pure)."""

from __future__ import annotations

import logging
import threading
from types import SimpleNamespace

from nodeagent.attempt_run import VANISHED, AttemptRun, classify_exit
from nodeagent.docker_runner import ContainerState, RunnerUnavailable


def state(status: str, exit_code: int | None = 0, oom: bool = False) -> ContainerState:
    return ContainerState(container_id="c", status=status, exit_code=exit_code, oom_killed=oom, labels={})


def test_the_exit_code_is_the_one_the_engines_wait_returned():
    assert classify_exit(code=3, state=state("exited", 9), engine_restarted=False).code == 3  # the wait's, not a read
    assert classify_exit(code=None, state=state("exited", 4), engine_restarted=False).code == 4


def test_an_oom_kill_is_kept():
    assert classify_exit(code=137, state=state("exited", 137, oom=True), engine_restarted=False).oom_killed


def test_a_container_removed_or_being_removed_from_outside_vanished_with_no_exit_code():
    for seen in (None, state("removing", 137)):
        end = classify_exit(code=137, state=seen, engine_restarted=False)
        assert (end.vanished, end.code, end.message) == (True, None, VANISHED)


def test_an_engine_restart_under_the_container_is_not_the_jobs_failure():
    end = classify_exit(code=None, state=state("exited", 143), engine_restarted=True)
    assert end.vanished and end.code is None and "restarted" in end.message


class PassingHiccup:
    """The engine's wait fails once (a socket error), the container runs on, then exits 7."""

    def __init__(self):
        self.waits = 0

    def wait(self, cid):
        self.waits += 1
        if self.waits == 1:
            raise RunnerUnavailable("connection reset")
        return 7

    def inspect(self, cid):
        return state("running", None) if self.waits == 1 else state("exited", 7)


def test_a_passing_engine_error_while_the_container_runs_on_keeps_its_real_exit():
    run = object.__new__(AttemptRun)
    run.ex = SimpleNamespace(runner=PassingHiccup(), closing=threading.Event(), log=logging.getLogger("t"))
    run.attempt_id, run._exited, run.shipper = 1, threading.Event(), SimpleNamespace(wakeup=threading.Event())
    run._wait_exit("c")
    assert (run._exit.code, run._exit.vanished) == (7, False)
