"""The engine's own `start` of a created container, with and without the agent's container options (issue 35).

    .venv/bin/python bench/engine_start.py [--runs 8] [--wait-first] [--runtime runsc]

Through docker-py on the local engine, `alpine:3.20 true` with `--network none`: per variant, create, time the
start call alone and the wait after it (the engine's own exit latency: `true` exits at once), remove; prints the
medians. Variants: plain, then each option the agent sets (cap_drop ALL,
no-new-privileges, a pids limit, memory = memory+swap, a CPU quota, init, read-only root) alone and all together.
`--wait-first` also times each variant with the wait asked before the start (`condition="next-exit"` on a thread,
as the Docker CLI's `docker run` asks it), beside the wait asked once the start returned (as the node agent does).
`--runtime runsc`: every variant under gVisor (the sandbox tier), where the agent sets all of them but the init
(nodeagent/containers.py): "all but init" is that set.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

import docker

AGENT_OPTIONS = {
    "cap_drop": {"cap_drop": ["ALL"]},
    "no-new-privileges": {"security_opt": ["no-new-privileges"]},
    "pids": {"pids_limit": 256},
    "memory": {"mem_limit": 64 << 20, "memswap_limit": 64 << 20},
    "cpu": {"nano_cpus": 250_000_000},
    "init": {"init": True},
    "read-only": {"read_only": True},
}


def _wait_into(api, cid: str, answered: list[float]) -> None:
    api.wait(cid, condition="next-exit")
    answered.append(time.perf_counter())


def start_ms(api, host: dict, runs: int, *, wait_first: bool = False) -> tuple[float, float]:
    """Medians (ms) of the start call and of the wait's answer after the start returned; `wait_first`: the wait was
    asked before the start."""
    starts, waits = [], []
    for _ in range(runs):
        cid = api.create_container("alpine:3.20", ["true"], host_config=api.create_host_config(**host))["Id"]
        try:
            answered: list[float] = []
            waiter = threading.Thread(target=_wait_into, args=(api, cid, answered))
            if wait_first:
                waiter.start()
                time.sleep(0.05)  # the wait is registered with the engine before the start
            t0 = time.perf_counter()
            api.start(cid)
            t1 = time.perf_counter()
            if wait_first:
                waiter.join()
            else:
                api.wait(cid)
                answered.append(time.perf_counter())
            starts.append((t1 - t0) * 1000)
            waits.append((answered[0] - t1) * 1000)
        finally:
            api.remove_container(cid, force=True)
    return statistics.median(starts), statistics.median(waits)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--wait-first", action="store_true", help="also time the wait asked before the start")
    parser.add_argument("--runtime", default="", help="the engine runtime of every variant (e.g. runsc)")
    args = parser.parse_args()
    api, base = docker.from_env().api, {"network_mode": "none"}
    if args.runtime:
        base["runtime"] = args.runtime
    together = {k: v for opts in AGENT_OPTIONS.values() for k, v in opts.items()}
    but_init = {k: v for k, v in together.items() if k != "init"}
    variants = {"plain": {}, **AGENT_OPTIONS, "all of them": together, "all but init": but_init, "plain again": {}}
    for name, extra in variants.items():
        start, wait = start_ms(api, {**base, **extra}, args.runs)
        line = f"{name:20} start median {start:6.1f} ms   wait after it {wait:6.1f} ms"
        if args.wait_first:
            start, wait = start_ms(api, {**base, **extra}, args.runs, wait_first=True)
            line += f"   wait asked first: start {start:6.1f} ms, answered {wait:6.1f} ms after it"
        print(line, flush=True)


if __name__ == "__main__":
    main()
