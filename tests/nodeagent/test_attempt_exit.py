"""How a container's run ended, from the engine's wait result and one inspect after it (pure)."""

from __future__ import annotations

from nodeagent.attempt_run import VANISHED, classify_exit
from nodeagent.docker_runner import ContainerState


def state(status: str, exit_code: int | None = 0, oom: bool = False) -> ContainerState:
    return ContainerState(container_id="c", status=status, exit_code=exit_code, oom_killed=oom, labels={})


def test_the_exit_code_is_the_one_the_engines_wait_returned():
    assert classify_exit(code=3, state=state("exited", 3), engine_restarted=False).code == 3
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
