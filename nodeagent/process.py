"""The node agent's process around its loop (nodeagent/daemon.py): the command line, logging, the stop signals.

A signal wakes a thread blocked on a pipe that the signal itself writes to (`signal.set_wakeup_fd`), and that
thread sets the stop: the kernel may deliver a signal to any thread, and a Python handler runs only when the main
thread next executes bytecode, which a main thread blocked in `Event.wait()` never does.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading

from nodeagent.config import ConfigError, load
from nodeagent.daemon import EXIT_CONFIG, Daemon

log = logging.getLogger("euler.nodeagent")


def install_stop_signals(stop: threading.Event) -> None:
    """From the main thread: SIGTERM and SIGINT set `stop`, whichever thread the kernel delivers them to.
    The Python-level handler does nothing and takes no lock (an `Event.set()` there can deadlock against the
    main thread inside `Event.wait()`); a second signal is as harmless as the first."""
    read, write = os.pipe()
    os.set_blocking(write, False)  # set_wakeup_fd wants it; a full pipe already says "stop"
    signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: None)

    def watch() -> None:
        try:
            got = os.read(read, 1)
        except OSError:
            got = b""
        log.info("%s received", signal.Signals(got[0]).name if got else "a stop signal")
        stop.set()

    threading.Thread(target=watch, name="signals", daemon=True).start()


def parse_args(argv: list[str], env) -> dict:
    """The command line's few options, as the environment they stand for (`--ca-file PATH` = EULER_CA_FILE)."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="euler-node", description="The Euler node agent (configured by EULER_* variables)."
    )
    parser.add_argument(
        "--ca-file", help="PEM file of the CA that signed the control plane's certificate (EULER_CA_FILE)"
    )
    args = parser.parse_args(argv)
    env = dict(os.environ if env is None else env)
    if args.ca_file:
        env["EULER_CA_FILE"] = args.ca_file
    return env


def main(env=None, argv: list[str] | None = None) -> int:
    if argv and argv[0] in ("reclaim", "resume"):  # euler-node reclaim [--grace S] | resume (nodeagent/reclaim_cli.py)
        from nodeagent import reclaim_cli

        return reclaim_cli.main(argv, env)
    if argv:
        env = parse_args(argv, env)
    level = ((env or os.environ).get("EULER_LOG_LEVEL") or "INFO").upper()
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s %(message)s", stream=sys.stderr)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request would drown the state changes
    try:
        config = load(env)
    except ConfigError as exc:
        log.error("configuration: %s", exc)
        return EXIT_CONFIG
    stop = threading.Event()
    install_stop_signals(stop)  # before the probe and the engine: a stop during start-up is a clean stop too
    return Daemon(config, stop=stop).run()
