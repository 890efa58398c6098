"""The agent's stop signals: they set the stop whichever thread the kernel delivers them to, and never deadlock
against a main thread that holds the stop's own lock (the old handler called `Event.set()` there: two CI runs
SIGKILLed an agent that had received SIGTERM as it entered `stop.wait()`)."""

import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _run(body: str) -> subprocess.CompletedProcess:
    script = textwrap.dedent(
        """
        import os, signal, sys, threading, time
        from nodeagent.process import install_stop_signals
        stop = threading.Event()
        install_stop_signals(stop)
        """
    ) + textwrap.dedent(body)
    return subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=30, check=False
    )


def test_a_signal_that_arrives_while_the_main_thread_holds_the_stops_lock_still_stops():
    done = _run(
        """
        with stop._cond:  # what Event.wait() holds while it sets itself up
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.2)  # the Python-level handler runs in here
        assert stop.wait(30), "the stop was never set"
        print("stopped")
        """
    )
    assert done.returncode == 0, done.stderr
    assert "stopped" in done.stdout


def test_a_signal_delivered_to_another_thread_wakes_a_main_thread_blocked_in_wait():
    done = _run(
        """
        other = threading.Thread(target=time.sleep, args=(30,), daemon=True)
        other.start()
        threading.Timer(0.3, lambda: signal.pthread_kill(other.ident, signal.SIGTERM)).start()
        stop.wait()
        print("stopped")
        """
    )
    assert done.returncode == 0, done.stderr
    assert "stopped" in done.stdout


def test_a_second_signal_during_the_stop_is_harmless():
    done = _run(
        """
        os.kill(os.getpid(), signal.SIGINT)
        stop.wait()
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.2)
        print("stopped cleanly")
        """
    )
    assert done.returncode == 0, done.stderr
    assert "stopped cleanly" in done.stdout
