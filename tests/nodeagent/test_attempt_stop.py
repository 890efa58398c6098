"""The agent's one stop path (nodeagent/attempt_stop.py): the grace, the stop file, the warning, the order of steps."""

from __future__ import annotations

import io
import tarfile
import threading

from nodeagent import attempt_stop, protocol


def test_the_grace_is_the_commands_else_the_assignments_else_the_fallback():
    assert attempt_stop.grace_for(command=5, assignment=30, fallback=10) == 5
    assert attempt_stop.grace_for(command=None, assignment=30, fallback=10) == 30
    assert attempt_stop.grace_for(command=None, assignment=None, fallback=10) == 10
    assert attempt_stop.grace_for(command=0, assignment=30, fallback=10) == 0


def test_no_server_can_ask_a_grace_past_the_agents_own_bound():
    assert attempt_stop.grace_for(command=10**9, assignment=None, fallback=10) == protocol.MAX_STOP_GRACE_SECONDS
    assert attempt_stop.grace_for(command=-5, assignment=None, fallback=10) == 0


def _members(data: bytes) -> dict[str, bytes | None]:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {m.name: (tar.extractfile(m).read() if m.isfile() else None) for m in tar.getmembers()}


def test_the_stop_file_archive_holds_the_word_at_run_euler_stop():
    assert _members(attempt_stop.stop_file_archive("reclaim", under_run=True)) == {
        "euler": None,
        "euler/stop": b"reclaim\n",
    }
    assert _members(attempt_stop.stop_file_archive("cancel", under_run=False))["run/euler/stop"] == b"cancel\n"


def test_each_stop_reason_has_its_word_and_an_unknown_one_reads_stop():
    words = {r: protocol.stop_word(r) for r in ("cancelled", "timeout", "reclaim", "preempt", "quota_exceeded")}
    assert words == {
        "cancelled": "cancel",
        "timeout": "timeout",
        "reclaim": "reclaim",
        "preempt": "preempt",
        "quota_exceeded": "budget",
    }
    assert protocol.stop_word("node_draining") == "drain"
    assert protocol.stop_word("anything") == "stop"


def test_the_warning_is_due_once_warn_before_the_deadline():
    assert not attempt_stop.warn_due(now=89.0, deadline=100.0, warn_before=10, warned=False)
    assert attempt_stop.warn_due(now=90.0, deadline=100.0, warn_before=10, warned=False)
    assert not attempt_stop.warn_due(now=95.0, deadline=100.0, warn_before=10, warned=True)
    assert not attempt_stop.warn_due(now=95.0, deadline=100.0, warn_before=0, warned=False)
    assert not attempt_stop.warn_due(now=95.0, deadline=None, warn_before=10, warned=False)


def test_only_the_listed_signals_are_sent_as_a_warning():
    assert attempt_stop.warn_signal("sigusr2") == "SIGUSR2"
    assert attempt_stop.warn_signal("SIGKILL") is None
    assert attempt_stop.warn_signal("") is None


class RecordingRunner:
    def __init__(self, exited: threading.Event | None = None, *, exits_on_term: bool = False):
        self.calls: list[tuple] = []
        self.exited = exited
        self.exits_on_term = exits_on_term

    def write_stop_file(self, cid, word):
        self.calls.append(("file", word))

    def signal(self, cid, sig):
        self.calls.append(("signal", sig))
        if sig == "SIGTERM" and self.exits_on_term and self.exited is not None:
            self.exited.set()

    def stop(self, cid, *, grace):
        self.calls.append(("stop", grace))


def test_a_stop_writes_the_reason_then_sigterm_then_the_hook_then_sigkill_after_the_grace():
    exited = threading.Event()
    runner = RecordingRunner(exited)
    seen = []
    attempt_stop.stop_container(
        runner, "c1", reason="reclaim", grace=0, exited=exited, before_kill=lambda *a: seen.append(a[:2])
    )
    assert runner.calls == [("file", "reclaim"), ("signal", "SIGTERM"), ("signal", "SIGKILL")]
    assert seen == [("c1", "reclaim")]


def test_a_job_that_exits_in_its_grace_is_not_killed():
    exited = threading.Event()
    runner = RecordingRunner(exited, exits_on_term=True)
    attempt_stop.stop_container(runner, "c1", reason="cancelled", grace=30, exited=exited)
    assert runner.calls == [("file", "cancel"), ("signal", "SIGTERM")]


def test_a_failing_hook_or_stop_file_never_holds_the_stop():
    class Broken(RecordingRunner):
        def write_stop_file(self, cid, word):
            raise OSError("read-only")

    exited = threading.Event()
    runner = Broken(exited)

    def hook(*_):
        raise RuntimeError("checkpoint failed")

    attempt_stop.stop_container(runner, "c1", reason="preempt", grace=0, exited=exited, before_kill=hook)
    assert runner.calls == [("signal", "SIGTERM"), ("signal", "SIGKILL")]


def test_without_an_exit_waiter_dockers_stop_finishes_the_grace():
    runner = RecordingRunner()
    attempt_stop.stop_container(runner, "c1", reason="stale_attempt", grace=3, exited=None)
    assert runner.calls[:2] == [("file", "stale"), ("signal", "SIGTERM")]
    assert runner.calls[2][0] == "stop" and runner.calls[2][1] <= 3
