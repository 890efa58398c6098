"""Where placed → started goes: the node agent's start path, span by span, beside the engine's own create + start.

    .venv/bin/python bench/start_spans.py [--runs 20] [--warmup 2] [--isolation sandbox]

Boots the real platform like bench/job_latency.py (uvicorn web, Celery worker and beat, one `./euler-node` agent
on the local Docker engine), then, in alternating rounds so that the machine's load hits both alike:
- engine: `docker create` + `docker start` of `alpine:3.20 true` with --network none, timed through docker-py's
  low-level API on the same engine, then the wait from the start's return (the engine's exit latency; the
  removal is not timed);
- euler:  `POST /api/v1/jobs` of the same job (`--network none`), read until it shows `succeeded`; the agent's
  `start spans` log line for its attempt gives each span from the assignment's arrival to the `running` report:
  checks (runtime, egress, hooks before create), image (present and allowed here), spec (the node's part of
  the container spec), created (create + attach), hooks (inputs), started (the engine's start), readers (the
  record, the output reader and the exit waiter), reported (the `running` report's round trip); then the end:
  exit (until the owner knows the exit), drained (the last logs shipped), collected (outputs, GPU figures, the
  init's exec failure), ended (the `ended` report's round trip).
Each turn starts on a settled engine (bench/job_latency.py `settle`: the agent removes a job's container after its
`ended` report, and that removal would run into the next turn). Prints the medians (and p90), and the load averages
before and after. `--poll 0` waits for the end with one
blocking read (`GET /api/v1/jobs/{id}/wait`), as bench/cli.py's server path does, instead of reading the job every
`--poll` seconds (each read takes the web process's CPU while the engine starts the container).
With `--before DIR` (an older checkout, e.g. `git archive <commit> | tar -x -C DIR`, with `.venv` linked) its
agent runs as a second node of the same platform, and each round submits one job to each node (the order
alternating), so that both see the same load; the table then has a column for each.
With `--isolation sandbox` the job asks for a sandbox and the engine pair runs with `runtime="runsc"`; with
`--network default` the job is on the agent's job network (egress rules) and the engine pair on the engine's bridge.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
IMAGE = "alpine:3.20"
GETS: list[float] = []  # each read of the job: what the poll itself adds to "ended → API shows it"
LINE = re.compile(r"(start|end) spans attempt=(\d+) received=([\d.]+) (.*)")


def stamp(value: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def engine_pair(api, runtime: str, network: str) -> tuple[float, float, float]:
    """(create, start, exit) seconds of one container through docker-py's low-level API: `exit` is from the start's
    return to the wait's (the engine's own exit latency for `true`, which every start path pays); then removed."""
    host = api.create_host_config(network_mode=network, runtime=runtime or None)
    t0 = time.perf_counter()
    cid = api.create_container(IMAGE, command=["true"], host_config=host, labels={"euler.bench": "start_spans"})["Id"]
    t1 = time.perf_counter()
    api.start(cid)
    t2 = time.perf_counter()
    api.wait(cid)
    t3 = time.perf_counter()
    api.remove_container(cid, force=True)
    return t1 - t0, t2 - t1, t3 - t2


def euler_job(http, args, selector: dict) -> tuple[int, float, float, float, float, float]:
    """(attempt id, placed wall, started wall, ended wall, seen wall, POST → API shows succeeded seconds)."""
    body = {"name": "spans", "image": IMAGE, "command": ["true"], "network": args.network, "cpu_milli": 500,
            "memory_bytes": 256 << 20, "timeout_seconds": 3600, "node_selector": selector}  # fmt: skip
    if args.isolation:
        body["isolation"] = args.isolation
    t0 = time.perf_counter()
    r = http.post("jobs", json=body)
    r.raise_for_status()
    job_id = r.json()["id"]
    while True:
        g0 = time.perf_counter()
        if args.poll:
            job = http.get(f"jobs/{job_id}").json()
            GETS.append(time.perf_counter() - g0)
        else:  # one blocking read, answered when the job ends (bench/cli.py's server path)
            job = http.get(f"jobs/{job_id}/wait", params={"timeout": 20}).json()
        if job["state"] == "succeeded":
            elapsed, seen = time.perf_counter() - t0, time.time()
            attempt = job["attempts"][-1]
            placed, started = stamp(attempt["created_at"]), stamp(attempt["started_at"])
            return attempt["id"], placed, started, stamp(job["ended_at"]), seen, elapsed
        if job["state"] in ("failed", "cancelled", "lost"):
            raise SystemExit(f"job {job_id} {job['state']}: {job.get('reason')} {job['attempts'][-1]['message']}")
        time.sleep(args.poll)


def spans_of(log: str, attempt_id: int) -> tuple[float, dict[str, float]] | None:
    """(the wall clock the assignment arrived, {span: seconds} of its start and end lines) once both are logged."""
    found, received = {}, None
    for m in LINE.finditer(log):
        if int(m.group(2)) == attempt_id:
            received = float(m.group(3))
            prefix = "" if m.group(1) == "start" else "end: "
            found.update({prefix + k: float(v) / 1000 for k, v in (kv.split("=") for kv in m.group(4).split())})
    return (received, found) if any(k.startswith("end: ") for k in found) else None


def p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.9 * len(ordered)) - 1)]


def second_agent(platform, checkout: Path):
    """A second node whose agent runs from an older checkout (its own `euler-node`, its own working directory:
    `python -m` puts the working directory first on sys.path), labelled `tree=before`."""
    from nodes.models import Node
    from nodes.services import enrollment_token_create, node_approve
    from tests.e2e import harness

    name = f"before-{uuid.uuid4().hex[:6]}"
    _, token = enrollment_token_create(trust="platform", label="bench")
    saved, harness.REPO = harness.REPO, checkout
    try:
        agent = platform.start_agent(name, token=token, env={"EULER_NODE_LABELS": "tree=before"})
    finally:
        harness.REPO = saved
    node = platform.wait_for(lambda: Node.objects.filter(name=name).first(), "the older agent enrolls", timeout=120)
    node_approve(node=node, trust="platform", public_pool=True)
    platform.wait_for(lambda: Node.objects.get(name=name).online, "the older node is online", timeout=120)
    return agent


def new_figures() -> dict:
    return {"server": {k: [] for k in SERVER}, "agent": {}}


SERVER = ("placed → received", "placed → started (server)", "started → ended (server)", "ended → API shows it",
          "POST → succeeded")  # fmt: skip


def one_round(http, agent, figures: dict, args, selector: dict) -> None:
    attempt_id, placed, started_at, ended_at, seen, elapsed = euler_job(http, args, selector)
    found = None
    for _ in range(100):  # the line is written as the report returns: at most a moment after
        found = spans_of(agent.log(), attempt_id)
        if found:
            break
        time.sleep(0.02)
    if found is None:
        raise SystemExit(f"no start spans for attempt {attempt_id} in the agent's log")
    received, spans = found
    values = (received - placed, started_at - placed, ended_at - started_at, seen - ended_at, elapsed)
    for label, value in zip(SERVER, values, strict=True):
        figures["server"][label].append(value)
    for k, v in spans.items():
        figures["agent"].setdefault(k, []).append(v)
    start = sum(v for k, v in spans.items() if not k.startswith("end: "))
    figures["agent"].setdefault("received → reported", []).append(start)
    exit_known = spans.get("readers", 0) + spans.get("reported", 0) + spans.get("end: exit", 0)
    figures["agent"].setdefault("started → exit known", []).append(exit_known)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--isolation", default="", choices=["", "sandbox"])
    parser.add_argument("--network", default="none", choices=["none", "default"], help="the job's network")
    parser.add_argument(
        "--poll", type=float, default=0.01, help="seconds between reads of the job; 0: one blocking read, as cli.py"
    )
    parser.add_argument("--before", metavar="DIR", type=Path, help="an older checkout: its agent is a second node")
    args = parser.parse_args()
    import docker
    from job_latency import boot, settle

    api = docker.from_env().api
    runtime = "runsc" if args.isolation == "sandbox" else ""
    load_before = os.getloadavg()
    engine: dict[str, list[float]] = {
        "docker create": [], "docker start": [], "create + start": [], "started → exit known": []
    }  # fmt: skip
    trees = {"this checkout": new_figures()}
    with tempfile.TemporaryDirectory(prefix="euler-bench-") as tmp:
        platform, http, _ = boot(Path(tmp), env={"EULER_NODE_LABELS": "tree=after"} if args.before else None)
        agents = {"this checkout": (next(iter(platform.agents.values())), {"tree": "after"} if args.before else {})}
        try:
            if args.before:
                agents["before"] = (second_agent(platform, args.before.resolve()), {"tree": "before"})
                trees["before"] = new_figures()
            for i in range(args.warmup + args.runs):
                settle(api)
                created, started, exited = engine_pair(api, runtime, "none" if args.network == "none" else "bridge")
                scratch = new_figures() if i < args.warmup else None
                order = list(agents.items()) if i % 2 == 0 else list(reversed(agents.items()))
                for tree, (agent, selector) in order:
                    settle(api)  # the agent removes each container after its `ended` report: not into the next turn
                    one_round(http, agent, scratch or trees[tree], args, selector)
                if scratch is None:
                    engine["docker create"].append(created)
                    engine["docker start"].append(started)
                    engine["create + start"].append(created + started)
                    engine["started → exit known"].append(exited)
        finally:
            http.close()
            platform.stop()
    load_after = os.getloadavg()
    tier = f"isolation {args.isolation}, engine runtime {runtime}" if runtime else "runc"
    print(f"start path of `{IMAGE} true` --network {args.network} ({tier}), {args.runs} alternating rounds;"
          f" load average before {'/'.join(f'{x:.1f}' for x in load_before)},"
          f" after {'/'.join(f'{x:.1f}' for x in load_after)}")  # fmt: skip
    names = list(trees)
    print(f"  {'span (median, p90)':<28} " + " ".join(f"{n:>22}" for n in names))

    def row(label: str, columns: list[list[float]]) -> None:
        cells = [f"{statistics.median(v) * 1000:8.1f} ({p90(v) * 1000:7.1f}) ms" if v else "" for v in columns]
        print(f"  {label:<28} " + " ".join(f"{c:>22}" for c in cells))

    for label in SERVER:
        row(label, [trees[n]["server"][label] for n in names])
    row("GET /jobs/{id} (one read)", [GETS] + [[]] * (len(names) - 1))
    print()
    labels = list(dict.fromkeys(k for n in names for k in trees[n]["agent"]))
    for label in labels:
        row(label, [trees[n]["agent"].get(label, []) for n in names])
    print()
    for label, values in engine.items():
        row(label, [values])


if __name__ == "__main__":
    main()
