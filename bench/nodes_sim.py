"""Node simulator: N simulated agents speak the real node protocol over HTTP to a real Euler platform.

    .venv/bin/python bench/nodes_sim.py --nodes 1000 --jobs 2000 --hold 60
    DATABASE_URL=postgres://root@127.0.0.1:5432/euler_sim .venv/bin/python bench/nodes_sim.py \\
        --nodes 10000 --jobs 20000 --hold 600 --procs 2

It starts the platform like the e2e tests do (its own Redis, one uvicorn web process, one Celery worker, beat)
on the database named by DATABASE_URL (migrated; a throw-away SQLite file when unset), or uses `--url` (a
running platform on that same database). Then:

1. enroll: one platform enrollment token per node (the real service), each agent enrolls over HTTP with it
   and keeps the credential it gets; the nodes are approved in bulk through `node_approve_many`;
2. beat: every agent heartbeats from its enrollment on (`--enroll-rate` paces the enrollments), at the interval
   the server tells it (open loop: latency from the moment a beat was due), listing the attempts it "runs"; web RSS is read before and after every agent holds an
   idle long-poll (memory per held poll);
3. hold: `--hold` seconds of heartbeats and idle long-polls (heartbeats/s, p50/p99, web CPU);
4. jobs: `--jobs` short jobs submitted over the public API; an agent that gets an assignment reports
   `running`, waits `--run-time`, ships `--log-chunks` chunks in one batch, reports `ended` with exit 0 (jobs/s submit →
   succeeded, placements/s, requests per job); then checks every job succeeded with exactly one attempt
   and was run exactly once;
5. false offline transitions: OFFLINE events of simulated nodes from their enrollment on (none of them ever
   stops beating).

The agents run in one asyncio process, or `--procs` processes. `simulate()` is what the smoke test calls.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from bench.httpraw import read_response  # noqa: E402

API = "/node-api/v1/"


# --- a minimal keep-alive HTTP/1.1 client: the simulator shares the CPUs with the server ----------------
class Conn:
    IDLE = 4.0  # uvicorn closes a keep-alive connection idle for 5 s: a real client opens a new one before that

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader = self.writer = None
        self.used = 0.0

    async def request(self, method: str, path: str, body: dict | None = None, headers: dict | None = None):
        now = time.monotonic()
        if self.writer is not None and now - self.used > self.IDLE:
            self.close()
        self.used = now
        reused = self.writer is not None
        try:
            return await self._request(method, path, body, headers)
        except (OSError, ConnectionError, asyncio.IncompleteReadError):
            if not reused:
                raise
        # The server closed an idle keep-alive connection (uvicorn does after 5 s): a real client reconnects.
        return await self._request(method, path, body, headers)

    async def _request(self, method: str, path: str, body: dict | None, headers: dict | None):
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port, limit=1 << 20)
        data = json.dumps(body).encode() if body is not None else b""
        head = f"{method} {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\nContent-Length: {len(data)}\r\n"
        if body is not None:
            head += "Content-Type: application/json\r\n"
        for name, value in (headers or {}).items():
            head += f"{name}: {value}\r\n"
        try:
            self.writer.write(head.encode() + b"\r\n" + data)
            status, payload, close = await read_response(self.reader)
        except BaseException:
            self.close()
            raise
        if close:
            self.close()
        self.used = time.monotonic()
        return status, payload

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


class Pool:
    """Shared keep-alive connections for short requests (heartbeats, reports, logs)."""

    def __init__(self, host: str, port: int, size: int) -> None:
        self.free: asyncio.Queue[Conn] = asyncio.Queue()
        for _ in range(size):
            self.free.put_nowait(Conn(host, port))

    async def request(self, *args, **kwargs):
        conn = await self.free.get()
        try:
            return await conn.request(*args, **kwargs)
        finally:
            self.free.put_nowait(conn)


class Stats:
    def __init__(self) -> None:
        self.hb_latency: list[float] = []
        self.hb_errors: dict[str, int] = {}
        self.requests: dict[str, int] = {}
        self.runs: dict[int, int] = {}  # job id → times an agent ran it
        self.stops = 0

    def count(self, kind: str) -> None:
        self.requests[kind] = self.requests.get(kind, 0) + 1

    def error(self, what: str) -> None:
        self.hb_errors[what] = self.hb_errors.get(what, 0) + 1


# --- one simulated agent -------------------------------------------------------------------------------
class Agent:
    def __init__(self, name: str, token: str, cfg: dict, pool: Pool, stats: Stats, host: str, port: int) -> None:
        self.name, self.token, self.cfg, self.stats = name, token, cfg, stats
        self.pool = pool  # reports, logs and enrollment share a few keep-alive connections
        self.beats = Conn(
            host, port
        )  # its own connection, as a real agent has: no node's heartbeat waits for another's
        self.host, self.port = host, port
        self.cred = ""
        self.interval = 5.0
        self.poll_wait = 25.0  # protocol.POLL_WAIT_SECONDS until a heartbeat reply says otherwise
        self.running: dict[int, str] = {}
        self.approved_beat = asyncio.Event()  # set by each heartbeat reply that says approved
        self.polling = False
        self.tasks: dict[int, asyncio.Task] = {}
        self.resources = {"cpu_milli": 4000, "memory_bytes": 8 << 30, "gpus": [], "docker_version": "sim"}

    def auth(self) -> dict:
        return {"Authorization": f"Bearer {self.cred}"}

    async def enroll(self) -> None:
        body = {"token": self.token, "name": self.name, "hostname": self.name, "agent_version": "sim",
                "resources": self.resources}  # fmt: skip
        for _ in range(20):
            try:
                status, payload = await self.pool.request("POST", API + "enroll", body)
            except (OSError, ConnectionError, asyncio.IncompleteReadError):
                await asyncio.sleep(0.5)
                continue
            self.stats.count("enroll")
            if status == 201:
                reply = json.loads(payload)
                self.cred, self.interval = reply["credential"], float(reply["heartbeat_interval"])
                return
            if status not in (429, 502, 503):
                raise RuntimeError(f"{self.name}: enroll answered {status}: {payload[:200]!r}")
            await asyncio.sleep(0.5)
        raise RuntimeError(f"{self.name}: could not enroll")

    async def beat_loop(self, stop: asyncio.Event, measure: list[bool]) -> None:
        loop = asyncio.get_running_loop()
        due = loop.time() + random.random() * self.interval
        while not stop.is_set():
            delay = due - loop.time()
            if delay > 0:
                try:
                    await asyncio.wait_for(stop.wait(), delay)
                    return
                except TimeoutError:
                    pass
            body = {"agent_version": "sim", "resources": self.resources,
                    "running": [{"attempt_id": a, "state": s} for a, s in self.running.items()]}  # fmt: skip
            try:
                status, payload = await self.beats.request("POST", API + "heartbeat", body, self.auth())
                self.stats.count("heartbeat")
                if status == 200:
                    reply = json.loads(payload)
                    self.interval = float(reply["heartbeat_interval"])
                    self.poll_wait = float(reply.get("poll_wait") or self.poll_wait)
                    if reply.get("approval") == "approved":
                        self.approved_beat.set()
                    if measure[0]:
                        self.stats.hb_latency.append(loop.time() - due)
                    for command in reply.get("commands", []):
                        self.stop_attempt(int(command["attempt_id"]))
                else:
                    self.stats.error(str(status))
            except (OSError, ConnectionError, asyncio.IncompleteReadError) as exc:
                self.stats.error(type(exc).__name__)
            due = max(due + self.interval, loop.time())

    async def poll_loop(self, stop: asyncio.Event, polling: asyncio.Event) -> None:
        from nodeagent.backoff import Backoff

        await polling.wait()
        # As the agent does, it starts polling when a heartbeat tells it it is approved: the next one from now,
        # so that 10,000 polls are spread over an interval rather than sent (and timed out) all at once.
        self.approved_beat.clear()
        await self.approved_beat.wait()
        self.polling = True
        conn = Conn(self.host, self.port)
        backoff = Backoff()  # the agent's own: full jitter up to 60 s (a fixed retry would storm a busy server)
        while not stop.is_set():
            try:
                status, payload = await conn.request("POST", API + "poll", {"wait": self.poll_wait}, self.auth())
                self.stats.count("poll")
            except (OSError, ConnectionError, asyncio.IncompleteReadError):
                await asyncio.sleep(backoff.next_delay())
                continue
            if status != 200:
                await asyncio.sleep(backoff.next_delay())
                continue
            backoff.reset()
            reply = json.loads(payload)
            for a in reply.get("assignments", []):
                attempt_id = int(a["attempt_id"])
                if attempt_id not in self.tasks:
                    self.tasks[attempt_id] = asyncio.create_task(self.run(attempt_id, int(a["job_id"])))
            for command in reply.get("commands", []):
                self.stop_attempt(int(command["attempt_id"]))
        conn.close()

    def stop_attempt(self, attempt_id: int) -> None:
        task = self.tasks.get(attempt_id)
        if task is not None and not task.done():
            self.stats.stops += 1
            task.cancel()
        self.running.pop(attempt_id, None)

    async def report(self, attempt_id: int, body: dict) -> None:
        for _ in range(10):
            try:
                status, _ = await self.pool.request("POST", f"{API}attempts/{attempt_id}/report", body, self.auth())
                self.stats.count("report")
                if status in (200, 409):
                    return
            except (OSError, ConnectionError, asyncio.IncompleteReadError):
                pass
            await asyncio.sleep(0.5)

    async def run(self, attempt_id: int, job_id: int) -> None:
        self.stats.runs[job_id] = self.stats.runs.get(job_id, 0) + 1
        self.running[attempt_id] = "running"
        await self.report(attempt_id, {"state": "running", "container_id": f"sim{attempt_id}"})
        await asyncio.sleep(self.cfg["run_time"])
        chunks, offset = [], 0
        for seq in range(self.cfg["log_chunks"]):
            data = f"attempt {attempt_id} line {seq}\n"
            chunks.append({"seq": seq, "offset": offset, "stream": "stdout", "data": data})
            offset += len(data)
        if chunks:  # one batch, as the agent ships what it has read since its last request
            try:
                await self.pool.request("POST", f"{API}attempts/{attempt_id}/logs", {"chunks": chunks}, self.auth())
                self.stats.count("logs")
            except (OSError, ConnectionError, asyncio.IncompleteReadError):
                pass
        self.running[attempt_id] = "exited"
        await self.report(attempt_id, {"state": "ended", "exit_code": 0, "reason": "exited"})
        self.running.pop(attempt_id, None)


# --- one simulator process: its share of the agents, driven by commands from the parent -----------------
async def _agents_main(url: str, tokens: list[tuple[str, str]], cfg: dict, inbox, outbox) -> None:
    parts = urlsplit(url)
    host, port = parts.hostname, parts.port or 80
    stats = Stats()
    pool = Pool(host, port, cfg["connections"])
    agents = [Agent(name, token, cfg, pool, stats, host, port) for name, token in tokens]
    sem = asyncio.Semaphore(cfg["connections"])
    stop, polling, measure = asyncio.Event(), asyncio.Event(), [False]
    tasks: list[asyncio.Task] = []
    loop = asyncio.get_running_loop()
    spacing = 1.0 / cfg["enroll_rate"] if cfg.get("enroll_rate") else 0.0  # this process's share of the rate
    first = loop.time()

    async def enroll(i: int, agent: Agent) -> None:
        if spacing:
            await asyncio.sleep(max(0.0, first + i * spacing - loop.time()))
        async with sem:
            await agent.enroll()
        # Like a real agent: heartbeats from the moment it has a credential (pending until approved).
        tasks.append(asyncio.create_task(agent.beat_loop(stop, measure)))

    await asyncio.gather(*(enroll(i, a) for i, a in enumerate(agents)))
    outbox.put(("enrolled", len(agents)))
    tasks += [asyncio.create_task(a.poll_loop(stop, polling)) for a in agents]
    while True:
        command = await loop.run_in_executor(None, inbox.get)
        if command == "poll":
            polling.set()
        elif command == "measure":
            measure[0] = True
            stats.hb_latency.clear()
            stats.hb_errors.clear()
        elif command == "polling?":
            outbox.put(("polling", sum(a.polling for a in agents)))
        elif command == "snapshot":
            outbox.put(
                ("snapshot", dict(stats.requests), dict(stats.runs), list(stats.hb_latency), dict(stats.hb_errors))
            )
        elif command == "stop":
            stop.set()
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            outbox.put(("done", stats.hb_latency, stats.hb_errors, dict(stats.requests), dict(stats.runs), stats.stops))
            return


def _agents_process(url, tokens, cfg, inbox, outbox) -> None:
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(_agents_main(url, tokens, cfg, inbox, outbox))


# --- the parent: setup, phases, figures -----------------------------------------------------------------
def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(p / 100 * len(values)))]


class Web:
    """CPU seconds and RSS of the web process (and its children), from /proc."""

    def __init__(self, pid: int | None) -> None:
        import psutil

        self.proc = psutil.Process(pid) if pid else None

    def _all(self):
        return [self.proc, *self.proc.children(recursive=True)] if self.proc else []

    def cpu(self) -> float:
        return sum(sum(p.cpu_times()[:2]) for p in self._all())

    def rss(self) -> int:
        return sum(p.memory_info().rss for p in self._all())


def simulate(url: str, *, nodes: int, jobs: int, hold: float, procs: int = 1, run_time: float = 0.5,
             log_chunks: int = 3, connections: int = 64, web_pid: int | None = None, prefix: str = "",
             settle: float = 10.0, jobs_timeout: float = 900.0, submit: str = "api", enroll_rate: float = 0.0,
             out=print) -> dict:  # fmt: skip
    """Run the phases against a platform at `url` on this process's database; returns the figures."""
    import httpx
    from django.db import transaction
    from django.db.models import Count

    from jobs.models import Attempt, Job
    from nodes.models import EventKind, Node, NodeEvent
    from nodes.services import enrollment_token_create, node_approve_many
    from quotas.models import Quota
    from quotas.services import apikey_create, project_create

    prefix = prefix or f"sim{uuid.uuid4().hex[:5]}"
    cfg = {"run_time": run_time, "log_chunks": log_chunks, "connections": connections,
           "enroll_rate": enroll_rate / procs}  # fmt: skip
    web = Web(web_pid)
    t0 = time.time()
    tokens = []
    for start in range(0, nodes, 500):  # one commit per 500: the service, not a shortcut, but not 10,000 fsyncs
        with transaction.atomic():
            tokens += [(f"{prefix}-{i:05d}", enrollment_token_create(trust="platform", label=prefix)[1])
                       for i in range(start, min(start + 500, nodes))]  # fmt: skip
    out(f"  {nodes} enrollment tokens in {time.time() - t0:.1f} s")
    ctx = multiprocessing.get_context("spawn")
    workers = []
    for k in range(procs):
        inbox, outbox = ctx.Queue(), ctx.Queue()
        share = tokens[k::procs]
        p = ctx.Process(target=_agents_process, args=(url, share, cfg, inbox, outbox), daemon=True)
        p.start()
        workers.append((p, inbox, outbox))

    def tell(command: str) -> None:
        for _, inbox, _ in workers:
            inbox.put(command)

    def hear(kind: str, timeout: float = 900) -> list:
        got = []
        for _, _, outbox in workers:
            msg = outbox.get(timeout=timeout)
            if msg[0] != kind:
                raise RuntimeError(f"simulator process said {msg[0]}, expected {kind}")
            got.append(msg)
        return got

    result: dict = {"nodes": nodes, "jobs": jobs}
    try:
        t0 = time.time()
        hear("enrolled")
        out(f"  enrolled {nodes} agents over HTTP in {time.time() - t0:.1f} s")
        t0 = time.time()
        ids = list(Node.objects.filter(name__startswith=f"{prefix}-").values_list("pk", flat=True))
        for start in range(0, len(ids), 500):  # the bulk service, 500 nodes per transaction
            node_approve_many(nodes=Node.objects.filter(pk__in=ids[start : start + 500]), trust="platform",
                              public_pool=True)  # fmt: skip
        out(f"  approved {len(ids)} nodes through node_approve_many in {time.time() - t0:.1f} s")
        started = time.time()
        time.sleep(settle)
        rss_before = web.rss()
        tell("poll")
        t_poll = time.time()
        while time.time() - t_poll < 300:  # each agent starts at its next heartbeat: within one interval
            time.sleep(2)
            tell("polling?")
            if sum(m[1] for m in hear("polling")) >= nodes:
                break
        out(f"  every agent polling {time.time() - t_poll:.0f} s after the go")
        time.sleep(settle)
        rss_after = web.rss()
        result["rss_before_polls"] = rss_before
        result["rss_per_1000_polls"] = (rss_after - rss_before) / max(nodes / 1000, 1e-9)
        out(f"  web RSS {rss_before / 2**20:.0f} MiB → {rss_after / 2**20:.0f} MiB with {nodes} idle long-polls "
            f"held: {result['rss_per_1000_polls'] / 2**20:.2f} MiB per 1,000")  # fmt: skip
        tell("measure")
        cpu0, h0 = web.cpu(), time.time()
        time.sleep(hold)
        cpu1, h1 = web.cpu(), time.time()
        tell("snapshot")
        before_jobs = hear("snapshot")
        hold_requests = _sum([m[1] for m in before_jobs])
        result["hold_seconds"] = h1 - h0
        result["web_cpu_hold"] = (cpu1 - cpu0) / (h1 - h0)
        result["web_rss_hold_end"] = web.rss()
        held = [x for m in before_jobs for x in m[3]]
        # Every offline transition of a simulated node is false (none ever stops beating), from its enrollment on.
        offline_so_far = NodeEvent.objects.filter(node_id__in=ids, kind=EventKind.OFFLINE)
        out(f"  hold {h1 - h0:.0f} s: {len(held)} heartbeats, {len(held) / (h1 - h0):.0f}/s, p50 {pct(held, 50) * 1000:.1f} ms, "
            f"p99 {pct(held, 99) * 1000:.1f} ms, errors {_sum([m[4] for m in before_jobs]) or 0}; false offline "
            f"{offline_so_far.count()} since enrollment; web CPU {result['web_cpu_hold'] * 100:.0f}% of a core, RSS "
            f"{result['web_rss_hold_end'] / 2**20:.0f} MiB")  # fmt: skip

        # jobs
        project = project_create(name=f"{prefix}-jobs")
        Quota.objects.filter(project=project).update(max_concurrent_jobs=10**6, cpu_core_seconds=10**12)
        _, key = apikey_create(project=project, label=prefix)
        http = httpx.Client(base_url=url + "/api/v1/", headers={"X-Euler-API-Key": key}, timeout=60)
        body = {"image": "euler-test/busybox", "command": ["true"], "cpu_milli": 100, "memory_bytes": 32 << 20,
                "gpu_count": 0, "timeout_seconds": 600, "max_retries": 0}  # fmt: skip
        j0, cpu_j0 = time.time(), web.cpu()
        if submit == "service":
            submitted = _submit_through_service(project, body, jobs, prefix)
        else:
            submitted = _submit_all(http, body, jobs, prefix)
        j_submitted = time.time()
        how = "through job_submit in this process" if submit == "service" else "over the API"
        out(f"  submitted {jobs} jobs {how} in {j_submitted - j0:.1f} s")
        qs = Job.objects.filter(project=project)
        deadline = time.time() + jobs_timeout
        while time.time() < deadline:
            if qs.filter(ended_at__isnull=True).count() == 0:
                break
            time.sleep(1)
        j1, cpu_j1 = time.time(), web.cpu()
        tell("stop")
        done = hear("done", timeout=120)
        requests = _sum([m[3] for m in done])
        runs: dict[int, int] = {}
        for m in done:
            for job_id, n in m[4].items():
                runs[job_id] = runs.get(job_id, 0) + n
        latencies = [x for m in done for x in m[1]]
        errors = _sum([m[2] for m in done])
        states = dict(qs.values_list("state").annotate(n=Count("id")))
        attempts = Attempt.objects.filter(job__project=project)
        multi = qs.annotate(n=Count("attempts")).filter(n__gt=1).count()
        ended = qs.filter(ended_at__isnull=False)
        last_end = max((j.ended_at.timestamp() for j in ended.only("ended_at")), default=j1)
        created = sorted(a.created_at.timestamp() for a in attempts.only("created_at"))
        false_offline = NodeEvent.objects.filter(node_id__in=ids, kind=EventKind.OFFLINE)
        job_requests = {k: requests.get(k, 0) - hold_requests.get(k, 0) for k in requests}
        job_requests_total = sum(v for k, v in job_requests.items() if k != "enroll") + submitted
        result.update(
            heartbeats=len(latencies),
            heartbeat_rate=len(latencies) / max(time.time() - h0, 1e-9),
            hold_heartbeat_rate=hold_requests.get("heartbeat", 0) / max(h1 - started, 1e-9),
            p50=pct(latencies, 50),
            p99=pct(latencies, 99),
            mean=statistics.mean(latencies) if latencies else float("nan"),
            heartbeat_errors=errors,
            false_offline=false_offline.count(),
            states=states,
            jobs_with_several_attempts=multi,
            runs_not_once=sum(1 for job_id in qs.values_list("pk", flat=True) if runs.get(job_id, 0) != 1),
            jobs_per_s=len(created) and jobs / max(last_end - j0, 1e-9),
            placements_per_s=(len(created) / max(created[-1] - created[0], 1e-9)) if len(created) > 1 else 0.0,
            submit_seconds=j_submitted - j0,
            end_to_end_seconds=last_end - j0,
            requests_per_job=job_requests_total / max(jobs, 1),
            requests_per_job_without_heartbeats=(job_requests_total - job_requests.get("heartbeat", 0)) / max(jobs, 1),
            job_requests=job_requests,
            web_cpu_jobs=(cpu_j1 - cpu_j0) / max(j1 - j0, 1e-9),
            web_rss_end=web.rss(),
        )
    finally:
        for p, inbox, _ in workers:
            if p.is_alive():
                inbox.put("stop")
        for p, _, _ in workers:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    return result


def _sum(dicts: list[dict]) -> dict:
    total: dict = {}
    for d in dicts:
        for k, v in d.items():
            total[k] = total.get(k, 0) + v
    return total


def _submit_through_service(project, body: dict, jobs: int, prefix: str, per_commit: int = 200) -> int:
    """Submit with the API's own validation and service, in this process (no HTTP: the public API's sync views
    share one thread per web process, which the 20,000-job run would measure instead of the nodes). Returns
    0 requests."""
    from django.db import transaction

    from jobs import services
    from jobs.api.serializers import JobCreateSerializer

    for start in range(0, jobs, per_commit):
        with transaction.atomic():
            for i in range(start, min(start + per_commit, jobs)):
                spec = JobCreateSerializer(data={**body, "name": f"{prefix}-{i}"})
                spec.is_valid(raise_exception=True)
                services.job_submit(project=project, spec=dict(spec.validated_data))
    return 0


def _submit_all(http, body: dict, jobs: int, prefix: str, clients: int = 8) -> int:
    """Submit over the public API from a few threads; returns the number of requests made."""
    from concurrent.futures import ThreadPoolExecutor

    def one(i: int) -> int:
        for attempt in range(10):
            r = http.post("jobs", json={**body, "name": f"{prefix}-{i}"})
            if r.status_code == 201:
                return attempt + 1
            time.sleep(0.5)
        raise RuntimeError(f"could not submit job {i}: {r.status_code} {r.text[:200]}")

    with ThreadPoolExecutor(clients) as pool:
        return sum(pool.map(one, range(jobs)))


def report(r: dict, out=print) -> None:
    mib = 2**20
    out(f"nodes_sim: {r['nodes']} nodes, {r['jobs']} jobs")
    out(f"  heartbeats: {r['heartbeats']} measured, {r['heartbeat_rate']:.0f}/s, p50 {r['p50'] * 1000:.1f} ms, "
        f"p99 {r['p99'] * 1000:.1f} ms, mean {r['mean'] * 1000:.1f} ms, errors {r['heartbeat_errors'] or 0}")  # fmt: skip
    out(f"  false offline transitions: {r['false_offline']}")
    out(f"  web: CPU {r['web_cpu_hold'] * 100:.0f}% of a core holding the nodes ({r['hold_seconds']:.0f} s), "
        f"{r['web_cpu_jobs'] * 100:.0f}% during the jobs; RSS {r['rss_before_polls'] / mib:.0f} MiB before the polls, "
        f"{r['web_rss_hold_end'] / mib:.0f} MiB after the hold, {r['web_rss_end'] / mib:.0f} MiB at the end; "
        f"{r['rss_per_1000_polls'] / mib:.2f} MiB per 1,000 held long-polls")  # fmt: skip
    out(f"  jobs: {r['states']}, {r['jobs_with_several_attempts']} with more than one attempt, "
        f"{r['runs_not_once']} not run exactly once")  # fmt: skip
    out(f"  {r['jobs_per_s']:.1f} jobs/s submit → succeeded ({r['end_to_end_seconds']:.1f} s for all, "
        f"submitting took {r['submit_seconds']:.1f} s), placements {r['placements_per_s']:.1f}/s")  # fmt: skip
    out(f"  requests per job: {r['requests_per_job']:.2f} ({r['requests_per_job_without_heartbeats']:.2f} "
        f"without heartbeats; {r['job_requests']})")  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", help="a running platform on the same database (default: start one here)")
    ap.add_argument("--web-pid", type=int, help="with --url: the web process to measure")
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--hold", type=float, default=60.0, help="seconds of heartbeats and idle polls before jobs")
    ap.add_argument("--procs", type=int, default=1, help="simulator processes")
    ap.add_argument("--run-time", type=float, default=0.5, help="seconds each simulated job runs")
    ap.add_argument("--log-chunks", type=int, default=3)
    ap.add_argument("--connections", type=int, default=64, help="report/log connections per process")
    ap.add_argument("--jobs-timeout", type=float, default=900.0, help="seconds to wait for the jobs to end")
    ap.add_argument("--submit", choices=["api", "service"], default="api",
                    help="jobs over the public API, or through job_submit in this process")  # fmt: skip
    ap.add_argument(
        "--enroll-rate",
        type=float,
        default=0.0,
        help="enrollments/s over all processes (default: as fast as the server takes them)",
    )
    ap.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="platform setting")
    ap.add_argument("--keep-logs", metavar="DIR", help="copy the platform's process logs here when it stops")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="euler-sim-") as tmp:
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
        os.environ.setdefault("EULER_DATA_DIR", str(Path(tmp) / "data"))
        os.environ.setdefault("DJANGO_DEBUG", "true")
        import logging

        import django

        django.setup()
        logging.getLogger("httpx").setLevel(logging.WARNING)
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        platform = None
        url, pid = args.url, args.web_pid
        if url is None:
            from tests.e2e.harness import Platform

            env = dict(item.split("=", 1) for item in args.env)
            platform = Platform(Path(tmp) / "platform", env=env).start()
            url, pid = platform.url, platform.procs["web"].pid
        try:
            r = simulate(url, nodes=args.nodes, jobs=args.jobs, hold=args.hold, procs=args.procs,
                         run_time=args.run_time, log_chunks=args.log_chunks, connections=args.connections,
                         jobs_timeout=args.jobs_timeout, submit=args.submit,
                         enroll_rate=args.enroll_rate, web_pid=pid)  # fmt: skip
        finally:
            if platform is not None:
                platform.stop()
                if args.keep_logs:
                    platform.collect(Path(args.keep_logs))
        report(r)
    return 0


if __name__ == "__main__":
    sys.exit(main())
