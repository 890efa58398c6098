"""Heartbeat benchmark: N simulated nodes beat against a running Euler server; prints the sustained rate
and p50/p99 latency.

    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/heartbeats.py --nodes 2000 --interval 2 --duration 20
    .venv/bin/python bench/heartbeats.py --url http://127.0.0.1:8000 --nodes 10000 --interval 10 --duration 60

It creates the simulated nodes (`bench-00001`…, approved, with credentials) in the database named by
DATABASE_URL, starts uvicorn (`--workers`, default 2) unless `--url` names a running server that uses the
same database, sends each node's heartbeat every `--interval` seconds (open loop: latency is measured
from the moment a beat was due, so a slow server is not hidden by a waiting client), and deletes the
nodes at the end. `--closed C` instead runs C clients back to back to find the most the server gives.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from bench.httpraw import read_response  # noqa: E402

PREFIX = "bench-"


def setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()


def make_nodes(n: int) -> list[str]:
    """Create n approved nodes with fresh credentials; returns the credentials."""
    from django.utils import timezone

    from euler import tokens
    from nodes.auth import CREDENTIAL_PREFIX
    from nodes.models import Node

    Node.objects.filter(name__startswith=PREFIX).delete()
    creds, rows = [], []
    now = timezone.now()
    for i in range(n):
        new = tokens.make(CREDENTIAL_PREFIX)
        creds.append(new.secret)
        rows.append(
            Node(
                name=f"{PREFIX}{i:05d}", trust="platform", approval="approved", online=True, last_heartbeat_at=now,
                cpu_milli=4000, memory_bytes=8 << 30, credential_lookup=new.lookup, credential_digest=new.digest,
            )
        )  # fmt: skip
    Node.objects.bulk_create(rows, batch_size=1000)
    return creds


def drop_nodes() -> None:
    from nodes.models import Node

    Node.objects.filter(name__startswith=PREFIX).delete()


BODY = json.dumps(
    {"agent_version": "bench", "resources": {"cpu_milli": 4000, "memory_bytes": 8 << 30, "gpus": []}, "running": []}
).encode()


def request_bytes(host: str, credential: str) -> bytes:
    head = (
        f"POST /node-api/v1/heartbeat HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {credential}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(BODY)}\r\n\r\n"
    )
    return head.encode() + BODY


class Conn:
    """A minimal keep-alive HTTP/1.1 client: the load generator shares the CPUs with the server."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader = self.writer = None

    async def send(self, raw: bytes) -> int:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        self.writer.write(raw)
        try:
            status, _, close = await read_response(self.reader)
        except ConnectionError:
            self.writer = None
            raise
        if close:
            self.writer.close()
            self.writer = None
        return status


async def open_loop(url: str, creds: list[str], interval: float, duration: float, conns: int) -> dict:
    parts = urlsplit(url)
    host, port = parts.hostname, parts.port or 80
    reqs = [request_bytes(f"{host}:{port}", c) for c in creds]
    pool: asyncio.Queue[Conn] = asyncio.Queue()
    for _ in range(conns):
        pool.put_nowait(Conn(host, port))
    latencies: list[float] = []
    errors: dict[str, int] = {}
    tasks: set[asyncio.Task] = set()
    start = time.monotonic()
    end = start + duration
    n = len(reqs)

    async def beat(raw: bytes, due: float) -> None:
        conn = await pool.get()
        try:
            status = await conn.send(raw)
            if status != 200:
                errors[str(status)] = errors.get(str(status), 0) + 1
            else:
                latencies.append(time.monotonic() - due)
        except (OSError, asyncio.IncompleteReadError, ConnectionError) as exc:
            conn.writer = None
            errors[type(exc).__name__] = errors.get(type(exc).__name__, 0) + 1
        finally:
            pool.put_nowait(conn)

    k = 0  # the k-th beat overall is due at start + k * interval / n (node k % n)
    step = interval / n
    while True:
        now = time.monotonic()
        if now >= end:
            break
        while start + k * step <= now:
            t = asyncio.create_task(beat(reqs[k % n], start + k * step))
            tasks.add(t)
            t.add_done_callback(tasks.discard)
            k += 1
        await asyncio.sleep(0.002)
    sent = k
    if tasks:
        await asyncio.wait(tasks, timeout=30)
    elapsed = time.monotonic() - start
    return {"sent": sent, "ok": len(latencies), "errors": errors, "elapsed": elapsed, "latencies": latencies}


async def closed_loop(url: str, creds: list[str], clients: int, duration: float, noop: bool = False) -> dict:
    parts = urlsplit(url)
    host, port = parts.hostname, parts.port or 80
    reqs = [request_bytes(f"{host}:{port}", c) for c in creds]
    if noop:
        reqs = [f"GET /healthz HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode()]
    latencies: list[float] = []
    errors: dict[str, int] = {}
    end = time.monotonic() + duration

    async def client(i: int) -> None:
        conn = Conn(host, port)
        j = i
        while time.monotonic() < end:
            t0 = time.monotonic()
            try:
                status = await conn.send(reqs[j % len(reqs)])
                if status == 200:
                    latencies.append(time.monotonic() - t0)
                else:
                    errors[str(status)] = errors.get(str(status), 0) + 1
            except (OSError, asyncio.IncompleteReadError, ConnectionError) as exc:
                conn.writer = None
                errors[type(exc).__name__] = errors.get(type(exc).__name__, 0) + 1
            j += clients

    t0 = time.monotonic()
    await asyncio.gather(*(client(i) for i in range(clients)))
    return {
        "sent": len(latencies) + sum(errors.values()),
        "ok": len(latencies),
        "errors": errors,
        "elapsed": time.monotonic() - t0,
        "latencies": latencies,
    }


async def warm_up(url: str, creds: list[str], rounds: int, clients: int = 32) -> None:
    """Each node beats `rounds` times, unmeasured, so that every web process has seen it (the steady state:
    the first heartbeat a process sees from a node authenticates it fully)."""
    parts = urlsplit(url)
    host, port = parts.hostname, parts.port or 80
    reqs = [request_bytes(f"{host}:{port}", c) for c in creds] * rounds

    async def client(i: int) -> None:
        conn = Conn(host, port)
        for raw in reqs[i::clients]:
            try:
                await conn.send(raw)
            except (OSError, asyncio.IncompleteReadError, ConnectionError):
                conn.writer = None

    await asyncio.gather(*(client(i) for i in range(clients)))


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(p / 100 * len(values)))]


def start_server(workers: int, app: str = "config.asgi:application") -> tuple[subprocess.Popen, str]:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    argv = [sys.executable, "-m", "uvicorn", app, "--app-dir", str(REPO), "--host", "127.0.0.1", "--port", str(port),
            "--no-access-log", "--log-level", "warning", "--workers", str(workers), "--loop", "uvloop", "--http", "httptools"]  # fmt: skip
    from django.conf import settings

    env = {**os.environ, "DJANGO_DEBUG": "false", "DJANGO_SECRET_KEY": settings.SECRET_KEY}
    env["EULER_ENCRYPTION_KEYS"] = settings.EULER_ENCRYPTION_KEYS
    proc = subprocess.Popen(argv, cwd=REPO, env=env)
    url = f"http://127.0.0.1:{port}"
    import httpx

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise SystemExit("the server did not start")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", help="a running server on the same database (default: start uvicorn here)")
    ap.add_argument("--workers", type=int, default=2, help="uvicorn workers when the bench starts the server")
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--interval", type=float, default=10.0, help="seconds between one node's heartbeats")
    ap.add_argument("--duration", type=float, default=30.0)
    ap.add_argument("--connections", type=int, default=128, help="client connections (open loop)")
    ap.add_argument("--closed", type=int, default=0, metavar="C", help="closed loop with C clients instead")
    ap.add_argument("--warm-up", type=int, default=3, metavar="R", help="unmeasured heartbeats per node first")
    ap.add_argument("--no-hooks", action="store_true", help="serve without the other apps' heartbeat hooks")
    ap.add_argument("--calibrate", action="store_true", help="closed loop against GET /healthz (a no-op view) too")
    ap.add_argument("--rounds", type=int, default=4, help="with --closed --calibrate: alternating rounds")
    ap.add_argument("--server-pid", type=int, help="with --url: the server process whose CPU to measure")
    args = ap.parse_args()

    setup_django()
    creds = make_nodes(args.nodes)
    proc = None
    try:
        url = args.url
        if url is None:
            app = "bench.heartbeats_nohooks_asgi:application" if args.no_hooks else "config.asgi:application"
            proc, url = start_server(args.workers, app)
        if args.warm_up:
            asyncio.run(warm_up(url, creds, args.warm_up))
        server = ServerCpu(proc.pid if proc else args.server_pid)
        if args.calibrate and args.closed:
            # Alternate heartbeats and the no-op in short rounds: on a shared machine the load drifts.
            mode = f"closed loop, {args.closed} clients, {args.rounds} alternating rounds"
            result, noop = _empty(), _empty()
            for _ in range(args.rounds):
                _add(
                    result,
                    server.measure(
                        lambda: asyncio.run(closed_loop(url, creds, args.closed, args.duration / args.rounds))
                    ),
                )
                _add(
                    noop,
                    server.measure(
                        lambda: asyncio.run(closed_loop(url, [], args.closed, args.duration / args.rounds, noop=True))
                    ),
                )
        elif args.closed:
            mode = f"closed loop, {args.closed} clients"
            result = server.measure(lambda: asyncio.run(closed_loop(url, creds, args.closed, args.duration)))
        else:
            mode = f"open loop, offered {args.nodes / args.interval:.0f}/s, {args.connections} connections"
            result = server.measure(
                lambda: asyncio.run(open_loop(url, creds, args.interval, args.duration, args.connections))
            )
        if args.calibrate and not args.closed:
            noop = server.measure(lambda: asyncio.run(closed_loop(url, [], 16, min(args.duration, 10), noop=True)))
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=15)
        drop_nodes()
    lat = result["latencies"]
    hooks = " (no hooks)" if args.no_hooks else ""
    print(f"heartbeats{hooks}: {args.nodes} nodes, interval {args.interval:g} s, {args.duration:g} s, {mode}")
    unfinished = result["sent"] - result["ok"] - sum(result["errors"].values())
    print(f"  sent {result['sent']}, ok {result['ok']}, errors {result['errors'] or 0}, unanswered {unfinished}")
    print(f"  sustained {result['ok'] / result['elapsed']:.0f} heartbeats/s")
    if lat:
        print(
            f"  latency p50 {pct(lat, 50) * 1000:.1f} ms, p99 {pct(lat, 99) * 1000:.1f} ms, mean {statistics.mean(lat) * 1000:.1f} ms, max {max(lat) * 1000:.1f} ms"
        )
    if result.get("cpu") is not None and result["ok"]:
        print(f"  web CPU {result['cpu'] / result['ok'] * 1e6:.0f} µs per heartbeat")
    if args.calibrate:
        nl = noop["latencies"]
        hb_rate, noop_rate = result["ok"] / result["elapsed"], noop["ok"] / noop["elapsed"]
        print(
            f"  calibration: no-op GET /healthz, closed loop: {noop_rate:.0f}/s, p50 {pct(nl, 50) * 1000:.1f} ms, errors {noop['errors'] or 0}"
        )
        print(f"  ratio heartbeats/s ÷ no-op/s: {hb_rate / noop_rate:.2f}")
        if noop.get("cpu") is not None and noop["ok"] and result["ok"]:
            per_hb, per_noop = result["cpu"] / result["ok"], noop["cpu"] / noop["ok"]
            print(
                f"  web CPU per request: no-op {per_noop * 1e6:.0f} µs; ratio no-op ÷ heartbeat {per_noop / per_hb:.2f}"
            )
    return 0


def _empty() -> dict:
    return {"sent": 0, "ok": 0, "errors": {}, "elapsed": 0.0, "latencies": [], "cpu": 0.0}


def _add(total: dict, part: dict) -> None:
    for key in ("sent", "ok", "elapsed"):
        total[key] += part[key]
    total["latencies"] += part["latencies"]
    for k, v in part["errors"].items():
        total["errors"][k] = total["errors"].get(k, 0) + v
    total["cpu"] = None if total["cpu"] is None or part.get("cpu") is None else total["cpu"] + part["cpu"]


class ServerCpu:
    """CPU seconds the server (and its worker processes) spend during a phase: on a shared machine this is
    steadier than the rate."""

    def __init__(self, pid: int | None) -> None:
        import psutil

        self.proc = psutil.Process(pid) if pid else None

    def cpu(self) -> float | None:
        if self.proc is None:
            return None
        procs = [self.proc, *self.proc.children(recursive=True)]
        return sum(sum(p.cpu_times()[:2]) for p in procs)

    def measure(self, run) -> dict:
        before = self.cpu()
        result = run()
        after = self.cpu()
        result["cpu"] = None if before is None else after - before
        return result


if __name__ == "__main__":
    sys.exit(main())
