"""A TCP socket made inside a container's network namespace, so that the agent reaches a port the container
publishes to no one: not to the host's network, not to the job bridge (where the host and the LAN would see it).

The namespace of a thread can change (`setns(2)` with CLONE_NEWNET; a socket keeps the namespace it was made in),
so a short-lived thread enters the container's namespace, makes the socket, and leaves; the caller connects it to
127.0.0.1:<port> as usual. Needs CAP_SYS_ADMIN and the host's PID namespace (the agent as root on the host; in a
container: `pid: host` and `cap_add: [SYS_ADMIN]`).
"""

from __future__ import annotations

import ctypes
import os
import socket
import threading

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


class NamespaceError(OSError):
    pass


def _setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        errno = ctypes.get_errno()
        raise NamespaceError(errno, f"setns: {os.strerror(errno)}")


def open_ns(pid: int) -> int:
    """A file descriptor of process `pid`'s network namespace. It names that namespace, not the PID: a PID reused
    later by another process (another job's) cannot redirect a stream, and the namespace outlives its container only
    as long as the descriptor, with nothing listening in it."""
    return os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)


def _make(target: int, out: dict) -> None:
    try:
        own = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        out["error"] = exc
        return
    try:
        _setns(target)
        try:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setblocking(False)
            out["sock"] = sock
        finally:
            _setns(own)  # a thread that cannot go back ends here (it is this call's own thread)
    except OSError as exc:
        out["error"] = exc
    finally:
        os.close(own)


def socket_in(ns_fd: int) -> socket.socket:
    """A non-blocking, unconnected TCP socket in the network namespace that `ns_fd` (open_ns) names."""
    out: dict = {}
    thread = threading.Thread(target=_make, args=(ns_fd, out), name="euler-netns", daemon=True)
    thread.start()
    thread.join()
    if "sock" in out:
        return out["sock"]
    raise out.get("error") or NamespaceError(0, "no socket made")


class Namespaces:
    """The network namespaces of the containers this agent serves streams to, each opened once (by container id)."""

    def __init__(self, *, container_of, pid_of) -> None:
        self.container_of = container_of  # attempt id -> container id while it may serve (Executor.serving_container)
        self.pid_of = pid_of  # container id -> its init's PID while it runs (Executor.container_pid)
        self.fds: dict[str, tuple[int, int]] = {}  # container id -> (attempt id, namespace descriptor)
        self._lock = threading.Lock()

    def socket_for(self, attempt_id: int) -> socket.socket | None:
        """An unconnected socket inside the attempt's container's namespace; None: no such container serving here.
        Under one lock, so that a descriptor is never closed while a socket is being made with it."""
        cid = self.container_of(attempt_id)
        if cid is None:
            return None
        with self._lock:
            for gone, (attempt, fd) in list(self.fds.items()):
                if gone != cid and self.container_of(attempt) != gone:  # that attempt no longer serves
                    os.close(fd)
                    del self.fds[gone]
            found = self.fds.get(cid)
            if found is None:
                pid = self.pid_of(cid)
                if not pid:
                    return None
                found = self.fds[cid] = (attempt_id, open_ns(pid))
            return socket_in(found[1])

    def close(self) -> None:
        with self._lock:
            for _, fd in self.fds.values():
                os.close(fd)
            self.fds.clear()
