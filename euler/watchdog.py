"""Stops the process groups of `make up` when its supervisor dies without stopping them (kill -9, OOM).

Run by the supervisor as a plain script (`python euler/watchdog.py FD BOUND`; stdlib only, no Django):
it reads `+PGID` / `-PGID` lines from the pipe FD, whose only write end the supervisor holds. End of
file means the supervisor is gone: the leader of every group still in the set gets SIGTERM; the group
gets SIGKILL once its leader is gone, or when it is still alive BOUND seconds later. A clean stop removes every group first, so then it does nothing.
It ignores SIGINT, SIGTERM and SIGHUP (they are for the supervisor) and lives in its own session.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def signal_groups(pgids, sig: int) -> None:
    for pgid in pgids:
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def read_groups(fd: int) -> set[int]:
    """The groups still registered when the pipe reaches end of file."""
    groups: set[int] = set()
    with os.fdopen(fd, "r", encoding="ascii", errors="replace") as pipe:
        for line in pipe:
            line = line.strip()
            if len(line) > 1 and line[1:].isdigit():
                (groups.add if line[0] == "+" else groups.discard)(int(line[1:]))
    return groups


def main(argv: list[str]) -> int:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    fd, bound = int(argv[1]), float(argv[2])
    groups = {g for g in read_groups(fd) if group_alive(g)}
    if not groups:
        return 0
    print(f"[euler] the supervisor is gone: stopping {len(groups)} process group(s)", flush=True)
    for leader in groups:  # each leader stops its own children; the group is killed when it is done
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(leader, signal.SIGTERM)
    deadline = time.monotonic() + bound
    while groups and time.monotonic() < deadline:
        time.sleep(0.1)  # not our children: there is no event to wait for
        signal_groups([g for g in groups if not process_alive(g)], signal.SIGKILL)  # what a leader left behind
        groups = {g for g in groups if group_alive(g)}
    if groups:
        print(
            f"[euler] killed process group(s) {sorted(groups)}: still running {bound:.0f} s after SIGTERM", flush=True
        )
        signal_groups(groups, signal.SIGKILL)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
