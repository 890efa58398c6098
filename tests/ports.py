"""Loopback ports for servers that a test starts and that bind after the test chose their port (a subprocess, a
restart on the same port).

`bind(0)` would hand out a port from the kernel's ephemeral range, where any outgoing connection on the machine
(and any other test worker's `bind(0)`) may take it before the server binds it, or while a stopped server is down
before it binds the same port again. So ports come from below that range (20000-32767 by default), each test
process starting at its own place in it (pytest-xdist worker gwN at the N-th block), and a port is reserved for
the life of the process by an exclusive lock on /tmp/euler-test-ports/<port>: another test process on this
machine (another worker, another checkout's run) skips it. No port is handed out twice in one process.
"""

from __future__ import annotations

import fcntl
import os
import re
import socket
import threading
from pathlib import Path

LOW, HIGH = 20000, 32768  # the ephemeral range starts at 32768 (net.ipv4.ip_local_port_range) on Linux by default
BLOCK = 500
LOCK_DIR = Path(os.environ.get("EULER_TEST_PORT_LOCKS", "/tmp/euler-test-ports"))

_lock = threading.Lock()
_held: dict[int, int] = {}  # port -> fd of its lock file, kept open: the reservation lasts as long as this process
_next: int | None = None


def _start() -> int:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    index = int(worker[2:]) + 1 if re.fullmatch(r"gw\d+", worker) else 0
    return LOW + (index * BLOCK) % (HIGH - LOW)


def _reserve(port: int) -> bool:
    LOCK_DIR.mkdir(mode=0o777, parents=True, exist_ok=True)
    fd = os.open(LOCK_DIR / str(port), os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return False
    _held[port] = fd
    return True


def _bindable(port: int) -> bool:
    for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET, "0.0.0.0")):
        with socket.socket(family) as s:
            try:
                s.bind((host, port))
            except OSError:
                return False
    return True


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on and no other test process will be given."""
    global _next
    with _lock:
        if _next is None:
            _next = _start()
        for _ in range(HIGH - LOW):
            port, _next = _next, LOW + (_next + 1 - LOW) % (HIGH - LOW)
            if port in _held:
                continue
            if not _reserve(port):
                continue
            if _bindable(port):
                return port
            # in use by something outside this scheme: keep the reservation so that this process skips it too
        raise RuntimeError(f"no free port left in {LOW}-{HIGH - 1}")
