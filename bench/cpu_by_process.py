"""Where a machine's CPU goes while a command runs, by kind of process (issue 34: the suite is CPU-bound).

    .venv/bin/python bench/cpu_by_process.py -- make test

Reads /proc every second while the command runs: each process's user + system time since it was first seen (a
process already running at the start counts from then), summed by what its command line says it is (an xdist worker,
an e2e web process, a Celery worker, a node agent, dockerd, PostgreSQL, Chromium, …), and the machine's busy time
from /proc/stat. A process that ends between two reads loses its last second at most (one that lives less than a
second may go unseen: the machine's busy figure still counts it). Prints the table at the end.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")
KINDS = (  # (what the command line contains, the kind), first match wins
    (" -u -c ", "pytest xdist worker"),
    ("pytest", "pytest"),
    ("uvicorn", "e2e web (uvicorn)"),
    ("celery", "Celery worker / beat"),
    ("euler-node", "node agent"),
    ("nodeagent", "node agent"),
    ("config.up", "make up"),
    ("manage.py", "manage.py"),
    ("dockerd", "dockerd"),
    ("containerd-shim", "containerd-shim"),
    ("containerd", "containerd"),
    ("runsc", "runsc"),
    ("runc", "runc"),
    ("postgres", "PostgreSQL"),
    ("redis-server", "Redis"),
    ("chrom", "Chromium"),
)


def kind(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None
    if "celery" in cmd:  # before "pytest": an e2e worker's schedule file lies under pytest's tmp dir
        return "Celery worker / beat"
    for needle, name in KINDS:
        if needle in cmd:
            return name
    return "other: " + (cmd.split(" ")[0].rsplit("/", 1)[-1] or "?")


def cpu_of(pid: str) -> tuple[float, int] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / TICK, int(fields[19])  # utime + stime, start time


def busy() -> float:
    with open("/proc/stat") as f:
        cpu = [int(x) for x in f.readline().split()[1:]]
    return (sum(cpu) - cpu[3] - cpu[4]) / TICK  # all but idle and iowait


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")
    seen: dict[tuple[int, int], list] = {}
    totals: dict[str, float] = {}

    def sample(first: bool) -> None:
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            read = cpu_of(entry)
            if read is None:
                continue
            cpu, started = read
            key = (int(entry), started)
            if key not in seen:
                name = kind(int(entry))
                if name is None:
                    continue
                seen[key] = [name, cpu if first else 0.0]
            name, last = seen[key]
            totals[name] = totals.get(name, 0.0) + cpu - last
            seen[key][1] = cpu

    start, busy0 = time.monotonic(), busy()
    sample(first=True)
    proc = subprocess.Popen(command)
    while proc.poll() is None:
        time.sleep(1)
        sample(first=False)
    sample(first=False)
    elapsed, used = time.monotonic() - start, busy() - busy0
    print(f"\n{' '.join(command)}: exit {proc.returncode}, {elapsed:.0f} s, machine busy {used:.0f} CPU-s")
    for name, cpu in sorted(totals.items(), key=lambda kv: -kv[1]):
        if cpu >= 1:
            print(f"  {name:32} {cpu:8.1f} CPU-s")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
