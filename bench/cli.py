"""`euler run` of the trivial container against `docker run --rm` of it, in alternating pairs.

    .venv/bin/python bench/cli.py [--pairs 10] [--warmup 2]

Boots the real platform like bench/job_latency.py (uvicorn web, Celery worker and beat, one `./euler-node`
agent on the local Docker engine, a throw-away SQLite database unless DATABASE_URL names one), then runs, in
turns so that drift hits all alike:
- docker: `docker run --rm --network none alpine:3.20 true`, a subprocess, until it exits;
- euler:  `euler run --network none alpine:3.20 -- true`, a subprocess, start-up included, until it exits;
- server: from this process, with an HTTP client already connected, `POST /api/v1/jobs` of the same job, then
  one blocking read, `GET /api/v1/jobs/{id}/wait`, which answers once the job has ended: the server's own path,
  without the CLI. `--poll 0.01` reads `GET /api/v1/jobs/{id}` every 10 ms instead (the figure before the blocking
  read existed; each read costs the web process ~20 ms of CPU on the 2-core machine the engine shares).
Each of the three starts on a settled engine: the agent removes a job's container once it has reported its end,
off the job's path, and that removal would otherwise run into the next turn (the next `docker run` above all); the
bench waits for it (the engine's own `wait` with condition `removed`), untimed, before each turn.
Prints the medians (and p90), the ratios to docker, and the CPU time (user + sys) of the euler process
(getrusage of the children), with `euler --version`, `python -c pass` and the imports `euler run` avoids (`re`, which
pip's console-script wrapper and `json` import: client/setup.py, euler_client/jsoncodec.py) for scale.

`--sandbox` runs the sandbox tier: `docker run --rm --runtime runsc …` against `euler run --isolation sandbox …`
(and the server path's job asks for `isolation: sandbox`).
`--before DIR` adds, in each round, `euler run` with PYTHONPATH=DIR: an older client under the same load, e.g.
    git archive 07f023c client | tar -x -C /tmp/before && .venv/bin/python bench/cli.py --before /tmp/before/client
run by DIR/euler when DIR holds one (the command as it was installed then: pip's console-script wrapper before
client/scripts/euler, say, with this interpreter on its first line), else by this environment's `euler`.
The client packages are byte-compiled first, as `pip install` leaves them (PYTHONDONTWRITEBYTECODE=1 would
otherwise make every start compile them again).
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
EULER = Path(sys.executable).parent / "euler"
IMAGE = "alpine:3.20"
DOCKER = ["docker", "run", "--rm", "--network", "none", IMAGE, "true"]
CLI = [str(EULER), "run", "--network", "none", IMAGE, "--", "true"]


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv: list[str], env: dict | None = None) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one subprocess, which must exit 0."""
    cpu0, t0 = children_cpu(), time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    elapsed, cpu = time.perf_counter() - t0, children_cpu() - cpu0
    if done.returncode != 0:
        raise SystemExit(f"{argv[:2]}: exit {done.returncode}, stdout {done.stdout!r}, stderr {done.stderr!r}")
    return elapsed, cpu


def stamp(value: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


SPANS: dict[str, list[float]] = {
    "submit → placed": [],  # the scheduling pass (the attempt row is written)
    "placed → started": [],  # the agent's long poll answers, docker create, attach, start, the report
    "started → ended": [],  # the container runs and exits, the agent sees it and reports
    "ended → API shows it": [],
}


def server_path(http, extra: dict | None = None, poll: float = 0.0) -> float:
    """Submit the same job over the API and wait until it shows succeeded (one blocking read, or reads every `poll`
    seconds); its spans from the server's records."""
    wall0, t0 = time.time(), time.perf_counter()
    r = http.post("jobs", json={"name": "true", "image": IMAGE, "command": ["true"], "network": "none",
                                "cpu_milli": 500, "memory_bytes": 256 << 20, "timeout_seconds": 3600,
                                **(extra or {})})  # fmt: skip
    r.raise_for_status()
    job_id = r.json()["id"]
    while True:
        job = (
            http.get(f"jobs/{job_id}/wait", params={"timeout": 20}).json()
            if not poll
            else http.get(f"jobs/{job_id}").json()
        )
        state = job["state"]
        if state == "succeeded":
            elapsed, seen = time.perf_counter() - t0, time.time()
            attempt = job["attempts"][-1]
            placed, started, ended = stamp(attempt["created_at"]), stamp(attempt["started_at"]), stamp(job["ended_at"])
            spans = (placed - wall0, started - placed, ended - started, seen - ended)
            for label, span in zip(SPANS, spans, strict=True):
                SPANS[label].append(span)
            return elapsed
        if state in ("failed", "cancelled", "lost"):
            raise SystemExit(f"server path: job {job_id} {state}")
        time.sleep(poll)


def p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.9 * len(ordered)) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", "--runs", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--poll", type=float, default=0.0, help="server path: read the job every POLL s (0: block)")
    parser.add_argument("--before", metavar="DIR", help="a directory holding an older euler_client, run beside")
    parser.add_argument(
        "--sandbox", action="store_true", help="the sandbox tier: `--isolation sandbox` against `--runtime runsc`"
    )
    args = parser.parse_args()
    docker_argv, cli_argv, extra = DOCKER, CLI, {}
    if args.sandbox:
        docker_argv = [*DOCKER[:3], "--runtime", "runsc", *DOCKER[3:]]
        cli_argv = [*CLI[:2], "--isolation", "sandbox", *CLI[2:]]
        extra = {"isolation": "sandbox"}
    if not EULER.exists():
        raise SystemExit(f"{EULER} is missing: pip install -e ./client")
    sys.path.insert(0, str(REPO / "client"))
    import euler_client
    from job_latency import boot, settle

    compileall.compile_dir(Path(euler_client.__file__).parent, quiet=1)
    if args.before:
        compileall.compile_dir(Path(args.before) / "euler_client", quiet=1)
        command = Path(args.before) / "euler"
        before_argv = [str(command), *cli_argv[1:]] if command.is_file() else cli_argv

    figures: dict[str, list[float]] = {"docker run --rm": [], "euler run": [], "server path (API)": []}
    scale = {
        "euler --version": [str(EULER), "--version"],
        "python -c pass": [sys.executable, "-c", "pass"],
        "python: import re": [sys.executable, "-c", "import re"],
        "python: import json": [sys.executable, "-c", "import json"],
    }
    cpu: dict[str, list[float]] = {"euler run": []} | {label: [] for label in scale}
    if args.before:
        figures["euler run (before)"], cpu["euler run (before)"] = [], []
    with tempfile.TemporaryDirectory(prefix="euler-bench-") as tmp:
        platform, http, key = boot(Path(tmp))
        import docker

        engine = docker.APIClient()
        # This checkout's client, whichever one the virtual environment's `euler` was installed from.
        path = os.pathsep.join(filter(None, [str(REPO / "client"), os.environ.get("PYTHONPATH")]))
        env = {**os.environ, "HOME": tmp, "EULER_URL": platform.url, "EULER_API_KEY": key, "PYTHONPATH": path}
        try:
            for i in range(args.warmup + args.pairs):
                settle(engine)
                docker_s, _ = timed(docker_argv)
                euler_s, euler_cpu = timed(cli_argv, env)
                settle(engine)
                server_s = server_path(http, extra, args.poll)
                if args.before:
                    settle(engine)
                    before_s, before_cpu = timed(before_argv, {**env, "PYTHONPATH": args.before})
                if i >= args.warmup:
                    if args.before:
                        figures["euler run (before)"].append(before_s)
                        cpu["euler run (before)"].append(before_cpu)
                    figures["docker run --rm"].append(docker_s)
                    figures["euler run"].append(euler_s)
                    figures["server path (API)"].append(server_s)
                    cpu["euler run"].append(euler_cpu)
        finally:
            engine.close()
            http.close()
            platform.stop()
    for label, argv in scale.items():
        for _ in range(args.pairs):
            cpu[label].append(timed(argv, {**os.environ, "PYTHONPATH": path})[1])
    docker = statistics.median(figures["docker run --rm"])
    tier = " (sandbox tier: --isolation sandbox against --runtime runsc)" if args.sandbox else ""
    print(f"euler run vs docker run --rm of `{IMAGE} true` with --network none{tier}, {args.pairs} alternating"
          f" rounds (load average {'/'.join(f'{x:.1f}' for x in os.getloadavg())})")  # fmt: skip
    for label, values in figures.items():
        median = statistics.median(values)
        print(f"  {label:<20} median {median * 1000:6.0f} ms   p90 {p90(values) * 1000:6.0f} ms"
              f"   {median / docker:4.2f}x docker")  # fmt: skip
    print("  the server path, from the server's records (median):")
    for label, values in SPANS.items():
        print(f"    {label:<26} {statistics.median(values[-args.pairs :]) * 1000:6.0f} ms")
    print("  CPU time of the process (user + sys), median:")
    for label, values in cpu.items():
        print(f"    {label:<20} {statistics.median(values) * 1000:6.0f} ms")


if __name__ == "__main__":
    main()
