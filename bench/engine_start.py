"""The engine's own `start` of a created container, with and without the agent's container options (issue 35).

    .venv/bin/python bench/engine_start.py [--runs 8]

Through docker-py on the local engine, `alpine:3.20 true` with `--network none`: per variant, create, time the
start call alone and the wait after it (the engine's own exit latency: `true` exits at once), remove; prints the
medians. Variants: plain, then each option the agent sets (cap_drop ALL,
no-new-privileges, a pids limit, memory = memory+swap, a CPU quota, init, read-only root) alone and all together.
"""

from __future__ import annotations

import argparse
import statistics
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


def start_ms(api, host: dict, runs: int) -> tuple[float, float]:
    """Medians (ms) of the start call and of the wait after it returned."""
    starts, waits = [], []
    for _ in range(runs):
        cid = api.create_container("alpine:3.20", ["true"], host_config=api.create_host_config(**host))["Id"]
        try:
            t0 = time.perf_counter()
            api.start(cid)
            t1 = time.perf_counter()
            api.wait(cid)
            starts.append((t1 - t0) * 1000)
            waits.append((time.perf_counter() - t1) * 1000)
        finally:
            api.remove_container(cid, force=True)
    return statistics.median(starts), statistics.median(waits)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=8)
    args = parser.parse_args()
    api, base = docker.from_env().api, {"network_mode": "none"}
    together = {k: v for opts in AGENT_OPTIONS.values() for k, v in opts.items()}
    variants = {"plain": {}, **AGENT_OPTIONS, "all of them": together, "plain again": {}}
    for name, extra in variants.items():
        start, wait = start_ms(api, {**base, **extra}, args.runs)
        print(f"{name:20} start median {start:6.1f} ms   wait after it {wait:6.1f} ms", flush=True)


if __name__ == "__main__":
    main()
