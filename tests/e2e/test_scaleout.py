"""Scale-out: two web processes, two workers and beat on PostgreSQL + Redis, with simulated nodes.

The simulated nodes speak the node protocol over HTTP (enroll, heartbeat, poll, report running then
ended) without Docker, half of them through each web process; jobs are submitted through both. The
attempts ledger then proves that no node was ever double-booked (CPU, memory, a GPU UUID held twice)
and the JobEvent ledger that every job ended exactly once.

`EULER_SCALEOUT_JOBS` / `EULER_SCALEOUT_NODES` size the run (bench/scaleout.py runs 1,000 jobs).
"""

from __future__ import annotations

import os
import random
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.e2e.harness import PY, free_port, web_command

pytestmark = [pytest.mark.e2e]

N_JOBS = int(os.environ.get("EULER_SCALEOUT_JOBS", "200"))
N_NODES = int(os.environ.get("EULER_SCALEOUT_NODES", "20"))
SEED = int(os.environ.get("EULER_SCALEOUT_SEED", "0")) or random.SystemRandom().randrange(1, 1 << 30)
ENV = {"EULER_NODE_HEARTBEAT_MIN_INTERVAL": "1", "EULER_SCHEDULER_INTERVAL": "1", "EULER_JOB_RETRY_BACKOFF": "0.5"}
NODE_CPU, NODE_MEMORY, GPUS_PER_NODE = 4000, 8 << 30, 2
TERMINAL = {"succeeded", "failed", "cancelled", "lost"}


class SimNode(threading.Thread):
    """One simulated node: enrolls, heartbeats, long-polls, and runs each assignment as a short sleep."""

    def __init__(self, url: str, name: str, token: str, *, gpus: int, rng: random.Random) -> None:
        super().__init__(name=name, daemon=True)
        self.node_name, self.token, self.rng = name, token, rng
        self.http = httpx.Client(base_url=url + "/node-api/v1/", timeout=30, trust_env=False)
        gpu_list = [
            {"uuid": f"GPU-{name}-{i}", "index": i, "model": "Sim", "memory_bytes": 16 << 30} for i in range(gpus)
        ]
        self.resources = {"cpu_milli": NODE_CPU, "memory_bytes": NODE_MEMORY, "gpus": gpu_list}
        self.running: dict[int, float] = {}  # attempt id -> when it ends
        self.seen: set[int] = set()
        self.stop_event = threading.Event()
        self.errors: list[str] = []
        self.credential = ""

    def call(self, path: str, body: dict) -> dict:
        headers = {"Authorization": f"Bearer {self.credential}"} if self.credential else {}
        r = self.http.post(path, json=body, headers=headers)
        if r.status_code >= 400:
            self.errors.append(f"{path}: {r.status_code} {r.text[:200]}")
            return {}
        return r.json()

    def enroll(self) -> None:
        reply = self.call("enroll", {"token": self.token, "name": self.node_name, "resources": self.resources})
        self.credential = reply["credential"]

    def heartbeat(self) -> float:
        running = [{"attempt_id": a, "state": "running"} for a in self.running]
        reply = self.call("heartbeat", {"resources": self.resources, "running": running})
        return float(reply.get("heartbeat_interval", 1.0))

    def run(self) -> None:
        next_beat = 0.0
        while not self.stop_event.is_set():
            try:
                now = time.monotonic()
                if now >= next_beat:
                    next_beat = now + min(self.heartbeat(), 2.0)
                for attempt_id, ends in list(self.running.items()):
                    if ends <= now:
                        self.call(
                            f"attempts/{attempt_id}/report", {"state": "ended", "exit_code": 0, "reason": "exited"}
                        )
                        del self.running[attempt_id]
                wait = min([0.5] + [max(0.0, e - time.monotonic()) for e in self.running.values()])
                reply = self.call("poll", {"wait": round(wait, 3)})
                for a in reply.get("assignments", []):
                    if a["attempt_id"] in self.seen:
                        continue  # redelivered: already ours
                    self.seen.add(a["attempt_id"])
                    self.call(f"attempts/{a['attempt_id']}/report", {"state": "running", "container_id": "sim"})
                    self.running[a["attempt_id"]] = time.monotonic() + self.rng.uniform(0.2, 2.0)
                for c in reply.get("commands", []):
                    if self.running.pop(c["attempt_id"], None) is not None:
                        body = {"state": "ended", "reason": c.get("reason") or "cancelled", "exit_code": 143}
                        self.call(f"attempts/{c['attempt_id']}/report", body)
            except httpx.HTTPError as exc:  # a web process busy past the timeout: try again
                self.errors.append(f"{type(exc).__name__}: {exc}")
                time.sleep(0.2)


def overbooked(attempts: list[dict], capacity: dict[str, tuple[int, int]]) -> tuple[list[str], float]:
    """Pure check over the attempts ledger: every instant at which a node holds more CPU or memory than it
    has, or one GPU UUID twice; and the peak share of a node's CPU or memory ever held (how hard the run
    pressed). An attempt holds its share from `created_at` (placement) to `ended_at`; at equal instants
    releases count before placements."""
    problems, peak = [], 0.0
    by_node: dict[str, list[tuple]] = {}
    for a in attempts:
        end = a["ended_at"] if a["ended_at"] is not None else float("inf")
        by_node.setdefault(a["node"], []).extend([(a["created_at"], 1, a), (end, 0, a)])
    for node, events in by_node.items():
        cpu_cap, mem_cap = capacity[node]
        cpu = mem = 0
        gpus: dict[str, int] = {}
        for at, kind, a in sorted(events, key=lambda e: (e[0], e[1], e[2]["id"])):
            sign = 1 if kind else -1
            cpu += sign * a["cpu_milli"]
            mem += sign * a["memory_bytes"]
            peak = max(peak, cpu / cpu_cap, mem / mem_cap)
            for g in a["gpu_uuids"]:
                gpus[g] = gpus.get(g, 0) + sign
                if gpus[g] > 1:
                    problems.append(f"{node}: GPU {g} held twice at {at} (attempt {a['id']})")
            if cpu > cpu_cap or mem > mem_cap:
                problems.append(f"{node}: {cpu} mCPU / {mem} B held at {at} (attempt {a['id']})")
    return problems, peak


def test_the_overbooking_check_sees_a_gpu_held_twice_and_cpu_over_capacity():
    a = {
        "id": 1,
        "node": "n",
        "created_at": 0,
        "ended_at": 10,
        "cpu_milli": 3000,
        "memory_bytes": 1,
        "gpu_uuids": ["g"],
    }
    b = a | {"id": 2, "created_at": 5, "ended_at": 12}
    c = a | {"id": 3, "created_at": 10, "ended_at": 20, "gpu_uuids": []}  # starts as `a` ends: fine
    assert len(overbooked([a, b], {"n": (8000, 10)})[0]) == 1
    assert len(overbooked([a, b], {"n": (4000, 10)})[0]) == 2
    assert overbooked([a, c], {"n": (4000, 10)}) == ([], 0.75)


def _require_postgres() -> None:
    from django.db import connection

    if connection.vendor != "postgresql":
        why = "scale-out needs PostgreSQL (row locks across processes): set DATABASE_URL=postgres://…"
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)


def _answers(url: str) -> bool:
    try:
        return httpx.get(url + "/readyz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _ledgers(job_ids: list[int]):
    from jobs.models import Attempt, JobEvent

    attempts = [
        {
            "id": a.id,
            "node": a.node_name,
            "created_at": a.created_at.timestamp(),
            "ended_at": a.ended_at.timestamp() if a.ended_at else None,
            "cpu_milli": a.cpu_milli,
            "memory_bytes": a.memory_bytes,
            "gpu_uuids": list(a.gpu_uuids or []),
        }
        for a in Attempt.objects.filter(job_id__in=job_ids)
    ]
    ends: dict[int, int] = dict.fromkeys(job_ids, 0)
    for job_id in JobEvent.objects.filter(job_id__in=job_ids, to_state__in=TERMINAL).values_list("job_id", flat=True):
        ends[job_id] += 1
    return attempts, ends


def test_two_webs_two_workers_and_beat_never_double_book_twenty_nodes(platform_factory, project):
    _require_postgres()
    from jobs.models import Job
    from nodes.models import Node
    from nodes.services import enrollment_token_create, node_approve
    from quotas.models import Quota
    from quotas.services import apikey_create

    print(f"\nscale-out: seed {SEED}, {N_JOBS} jobs, {N_NODES} nodes")
    rng = random.Random(SEED)
    Quota.objects.filter(project=project).update(
        max_concurrent_jobs=100_000, cpu_core_seconds=10**12, gpu_seconds=10**12
    )
    platform = platform_factory(env=ENV)
    port2 = free_port()
    platform.spawn("web2", web_command(port2))
    platform.spawn("worker2", [PY, "-m", "celery", "-A", "euler", "worker", "-l", "info", "-c", "2",
                               "-n", "worker2@%h", "--without-gossip", "--without-mingle"])  # fmt: skip
    urls = [platform.url, f"http://127.0.0.1:{port2}"]
    platform.wait_for(lambda: _answers(urls[1]), "web2 answers /readyz", timeout=60)

    nodes = []
    for i in range(N_NODES):
        _, token = enrollment_token_create(trust="platform", label="scaleout")
        sim = SimNode(urls[i % 2], f"sim-{i:02d}-{uuid.uuid4().hex[:4]}", token, gpus=GPUS_PER_NODE * (i % 2),
                      rng=random.Random(rng.random()))  # fmt: skip
        sim.enroll()
        node_approve(node=Node.objects.get(name=sim.node_name), trust="platform", public_pool=True)
        nodes.append(sim)
    _, key = apikey_create(project=project, label="scaleout")
    clients = [httpx.Client(base_url=u + "/api/v1/", headers={"X-Euler-API-Key": key}, timeout=60) for u in urls]
    shapes = [(rng.choice([500, 1000, 2000]), rng.choice([512, 1024, 3072]) << 20, int(rng.random() < 0.2))
              for _ in range(N_JOBS)]  # fmt: skip

    def submit(i: int) -> int:
        cpu, mem, gpu = shapes[i]
        body = {"name": f"so-{i}", "image": "sim", "command": ["true"], "cpu_milli": cpu, "memory_bytes": mem,
                "gpu_count": gpu, "timeout_seconds": 600, "max_retries": 0}  # fmt: skip
        r = clients[i % 2].post("jobs", json=body)
        assert r.status_code == 201, r.text
        return r.json()["id"]

    # Half the jobs wait in the queue before any node is online, so that the first passes fill every node
    # to the brim at once; the other half arrive while those run.
    started = time.monotonic()
    with ThreadPoolExecutor(4) as pool:
        job_ids = list(pool.map(submit, range(N_JOBS // 2)))
    try:
        for sim in nodes:
            sim.start()
        with ThreadPoolExecutor(4) as pool:
            job_ids += list(pool.map(submit, range(N_JOBS // 2, N_JOBS)))
        submitted = time.monotonic() - started

        def all_ended() -> bool:
            return not Job.objects.filter(pk__in=job_ids).exclude(state__in=TERMINAL).exists()

        platform.wait_for(all_ended, f"all {N_JOBS} jobs end", timeout=max(120, N_JOBS * 0.5), every=0.5)
        elapsed = time.monotonic() - started
    finally:
        for sim in nodes:
            sim.stop_event.set()
        for sim in nodes:
            sim.join(timeout=35)

    attempts, ends = _ledgers(job_ids)
    capacity = {s.node_name: (NODE_CPU, NODE_MEMORY) for s in nodes}
    problems, peak = overbooked(attempts, capacity)
    not_once = {j: n for j, n in ends.items() if n != 1}
    states = dict.fromkeys(TERMINAL, 0)
    for state in Job.objects.filter(pk__in=job_ids).values_list("state", flat=True):
        states[state] += 1
    used = len({a["node"] for a in attempts})
    errors = [e for s in nodes for e in s.errors]
    print(
        f"scale-out: {N_JOBS} jobs, {len(attempts)} attempts on {used}/{N_NODES} nodes, submitted in {submitted:.1f} s,"
        f" all ended in {elapsed:.1f} s ({N_JOBS / elapsed:.1f} jobs/s); states {states};"
        f" peak share of a node held {peak:.0%}; double-booked instants {len(problems)}; jobs not ended exactly once {len(not_once)};"
        f" node-side errors {len(errors)}"
    )
    assert problems == []
    assert not_once == {}
    assert states["succeeded"] == N_JOBS, (states, errors[:5])
