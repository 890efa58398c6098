"""How a container's run ended, from the engine's wait result and one inspect after it (pure)."""

from __future__ import annotations

import logging
import threading

from nodeagent.attempt_exit import UNREPORTED_KILL, VANISHED, Exit, classify_exit, end_reason, maybe_oom, wait_for_exit
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
    end = wait_for_exit(PassingHiccup(), "c", closing=threading.Event(), log=logging.getLogger("t"), attempt_id=1)
    assert (end.code, end.vanished) == (7, False)


def test_the_end_reason_is_the_stop_asked_first_then_oom_then_an_unexecutable_command_else_a_plain_exit():
    def reason(exit_, stop=None, init=""):
        return end_reason(exit_, stop_reason=stop, stop_message="past its disk" if stop else "", init_failure=init)

    oom = Exit(code=137, oom_killed=True)
    assert reason(oom, stop="disk_limit") == ("disk_limit", "past its disk")
    assert reason(oom) == ("oom", "")
    assert reason(Exit(code=127), init="exec nope failed: No such file") == (
        "start_failed",
        "exec nope failed: No such file",
    )
    assert reason(Exit(code=127)) == ("exited", "")
    assert reason(Exit(code=0)) == ("exited", "")
    assert reason(Exit(code=137)) == ("exited", UNREPORTED_KILL)  # a SIGKILL nobody reported: say what it may be


class LateOom:
    """SIGKILLed, not flagged OOM at the inspect; the engine's `oom` event comes (gVisor's shim, loaded machine)."""

    def __init__(self, event: bool):
        self.event, self.asked = event, []

    def wait(self, cid):
        return 137

    def inspect(self, cid):
        return state("exited", 137)

    def oom_event(self, cid, *, within):
        self.asked.append(within)
        return self.event


def test_a_sigkill_waits_for_the_engines_oom_event_that_trails_the_exit():
    def end(runner, stopping=None):
        return wait_for_exit(
            runner, "c", closing=threading.Event(), log=logging.getLogger("t"), attempt_id=1, stopping=stopping,
            kernel_oom=lambda cid: None,  # the kernel's log unreadable: the engine alone
        )  # fmt: skip

    assert end(LateOom(event=True)).oom_killed
    plain = LateOom(event=False)
    assert not end(plain).oom_killed and plain.asked  # asked, no event: a plain SIGKILL (kill -9 by the job)
    ours = threading.Event()
    ours.set()
    ours_stop = LateOom(event=True)
    assert not end(ours_stop, stopping=ours).oom_killed and not ours_stop.asked  # our own stop's SIGKILL: no wait
    assert not maybe_oom(Exit(code=1), stopping=None) and maybe_oom(Exit(code=137), stopping=None)


def test_a_sigkill_the_kernel_logged_as_an_oom_kill_is_oom_without_waiting_for_the_engine():
    def end(runner, kernel, stopping=None):
        return wait_for_exit(
            runner, "c", closing=threading.Event(), log=logging.getLogger("t"), attempt_id=1, stopping=stopping,
            kernel_oom=kernel,
        )  # fmt: skip

    engine_silent = LateOom(event=False)
    assert end(engine_silent, lambda cid: cid == "c").oom_killed and not engine_silent.asked
    not_in_log = LateOom(event=True)
    assert end(not_in_log, lambda cid: False).oom_killed and not_in_log.asked  # the kernel's summary is rate-limited

    def unreadable(cid):
        raise PermissionError(cid)

    broken = LateOom(event=False)
    assert not end(broken, unreadable).oom_killed and broken.asked
    ours = threading.Event()
    ours.set()
    asked = []
    assert not end(LateOom(event=True), lambda cid: asked.append(cid) or True, stopping=ours).oom_killed
    assert asked == []  # our own stop's SIGKILL: nobody is asked
