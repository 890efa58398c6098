"""Gateway benchmark: direct vs through the gateway on loopback, under uvicorn and daphne.

    .venv/bin/python bench/gateway.py [--rate 200] [--seconds 5] [--servers uvicorn,daphne]

Starts an upstream agent (raw ASGI under uvicorn), seeds a throw-away SQLite database (or uses
DATABASE_URL), starts the Euler ASGI app under each server and prints: added p50/p99 latency at a
fixed request rate, closed-loop throughput of invoke vs an async no-op view on the same server,
and for SSE (20 events 50 ms apart) the added time to first byte and per-event delay.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable


# --- the upstream agent (run as `gateway.py upstream PORT`) -----------------------------------
async def upstream_app(scope, receive, send):
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    if scope["path"] == "/sse":
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        for i in range(20):
            body = f"data: {i} {time.time():.6f}\n\n".encode()
            await send({"type": "http.response.body", "body": body, "more_body": True})
            await asyncio.sleep(0.05)
        await send({"type": "http.response.body", "body": b""})
        return
    body = b'{"ok":true}'
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer")


SEED = """
import django; django.setup()
from quotas.services import project_create, apikey_create
from agents.services import agent_create
p = project_create(name="bench")
_, key = apikey_create(project=p, label="bench")
agent_create(project=p, fields={"name": "bench"}, instances=[{"base_url": "%s"}])
print(key)
"""


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q / 100))]


class RawPool:
    """A minimal keep-alive HTTP/1.1 GET client: far cheaper than httpx, so the load generator is
    not what saturates the (shared, 2-core) machine at a few hundred requests per second."""

    def __init__(self, url: str, headers: dict):
        parts = httpx.URL(url)
        self.host, self.port = parts.host, parts.port
        extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        target = parts.raw_path.decode()
        self.request = f"GET {target} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n{extra}\r\n".encode()
        self.idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def get(self) -> int:
        conn = self.idle.pop() if self.idle else await asyncio.open_connection(self.host, self.port)
        reader, writer = conn
        try:
            writer.write(self.request)
            head = await reader.readuntil(b"\r\n\r\n")
            status = int(head[9:12])
            lowered = head.lower()
            if b"transfer-encoding: chunked" in lowered:
                while True:
                    size = int((await reader.readuntil(b"\r\n")).strip(), 16)
                    await reader.readexactly(size + 2)
                    if size == 0:
                        break
            else:
                length = int(lowered.split(b"content-length:")[1].split(b"\r\n")[0])
                await reader.readexactly(length)
        except (OSError, asyncio.IncompleteReadError, ValueError, IndexError):
            writer.close()
            return 0
        self.idle.append(conn)
        return status

    def close(self) -> None:
        for _, writer in self.idle:
            writer.close()


async def fixed_rate(targets: list[tuple[str, dict]], rate: int, seconds: float) -> list[list[float]]:
    """Latencies per target; targets are called in turn, each at `rate`, so they share the same moments."""
    latencies: list[list[float]] = [[] for _ in targets]
    errors = [0 for _ in targets]
    pools = [RawPool(url, headers) for url, headers in targets]

    async def one(index: int):
        started = time.perf_counter()
        if await pools[index].get() == 200:
            latencies[index].append((time.perf_counter() - started) * 1000)
        else:
            errors[index] += 1

    for _ in range(50):  # warm the pools
        await asyncio.gather(*(one(i) for i in range(len(targets))))
    for found in latencies:
        found.clear()
    tasks, start, n = [], time.perf_counter(), int(rate * seconds) * len(targets)
    step = 1 / (rate * len(targets))
    for i in range(n):
        delay = start + i * step - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.ensure_future(one(i % len(targets))))
    await asyncio.gather(*tasks)
    for pool in pools:
        pool.close()
    if any(errors):
        print(f"failed calls (direct, gateway): {errors}")
    return latencies


async def closed_loop(url: str, headers: dict, seconds: float, concurrency: int = 32) -> float:
    done = 0
    pool = RawPool(url, headers)
    deadline = time.perf_counter() + seconds

    async def worker():
        nonlocal done
        while time.perf_counter() < deadline:
            if await pool.get() == 200:
                done += 1

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    pool.close()
    return done / seconds


async def sse_stream(client: httpx.AsyncClient, url: str, headers: dict) -> tuple[float, list[float], int]:
    """(TTFB ms, per-event delay ms from the agent's send time, frames received) of one stream."""
    started = time.perf_counter()
    first, delays, frames = 0.0, [], 0
    async with client.stream("GET", url, headers=headers) as response:
        async for chunk in response.aiter_raw():
            now = time.time()
            if not frames:
                first = (time.perf_counter() - started) * 1000
            for event in chunk.decode().split("\n\n"):
                if event.startswith("data:"):
                    delays.append((now - float(event.split()[2])) * 1000)
            frames += 1
    return first, delays, frames


async def sse_pairs(direct: str, gateway: str, headers: dict, runs: int):
    """`runs` times: one stream straight to the agent and one through the gateway, side by side."""
    async with httpx.AsyncClient(timeout=10) as client:
        pairs = [
            await asyncio.gather(sse_stream(client, direct, {}), sse_stream(client, gateway, headers))
            for _ in range(runs)
        ]
    split = []
    for part in ([p[0] for p in pairs], [p[1] for p in pairs]):
        split.append(([r[0] for r in part], [d for r in part for d in r[1]], [r[2] for r in part]))
    return split


async def concurrent_streams(url: str, headers: dict, n: int) -> dict:
    """n SSE streams through the gateway at once: how many got all 20 events, and how long it took."""
    limits = httpx.Limits(max_connections=n + 10)
    started = time.perf_counter()
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:

        async def one():
            try:
                _, delays, _ = await sse_stream(client, url, headers)
                return len(delays) == 20
            except httpx.HTTPError:
                return False

        complete = sum(await asyncio.gather(*(one() for _ in range(n))))
    return {"opened": n, "complete": complete, "seconds": round(time.perf_counter() - started, 2)}


def measured_cpu(server: subprocess.Popen, run, seconds: float) -> tuple[float, float]:
    """(requests/s, server CPU microseconds per request): CPU time holds up on a shared, busy machine."""
    proc = psutil.Process(server.pid)
    before = proc.cpu_times()
    rps = asyncio.run(run)
    after = proc.cpu_times()
    used = (after.user - before.user) + (after.system - before.system)
    return rps, used * 1e6 / max(1, rps * seconds)


def start_server(kind: str, port: int, env: dict) -> subprocess.Popen:
    if kind == "uvicorn":
        cmd = [
            PY,
            "-m",
            "uvicorn",
            "config.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--no-access-log",
            "--log-level",
            "warning",
            "--lifespan",
            "off",
        ]
    else:
        cmd = [PY, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "--verbosity", "0", "config.asgi:application"]
    return subprocess.Popen(cmd, cwd=ROOT, env=env)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--servers", default="uvicorn,daphne")
    parser.add_argument("--sse-runs", type=int, default=10)
    parser.add_argument("--streams", type=int, default=0, help="also hold this many SSE streams open at once")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="euler-bench-gw-"))
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "EULER_DATA_DIR": str(tmp),
        "DJANGO_DEBUG": "false",
        "DJANGO_SETTINGS_MODULE": "bench.gateway_settings",
        "DJANGO_SECRET_KEY": "bench-" + "x" * 40,
        "EULER_ENCRYPTION_KEYS": "b1:" + __import__("base64").b64encode(os.urandom(32)).decode(),
        "EULER_AGENT_ALLOWED_NETWORKS": "127.0.0.0/8",
        "EULER_LOG_LEVEL": "WARNING",
    }
    procs: list[subprocess.Popen] = []
    try:
        if "REDIS_URL" not in env:
            sys.path.insert(0, str(ROOT))
            from euler import embedded_redis

            procs.append(embedded_redis.start(tmp / "redis.sock"))
        up_port = free_port()
        procs.append(subprocess.Popen([PY, __file__, "upstream", str(up_port)], cwd=ROOT, env=env))
        direct = f"http://127.0.0.1:{up_port}"
        wait_http(direct + "/echo")
        subprocess.run([PY, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
        key = (
            subprocess.run([PY, "-c", SEED % direct], cwd=ROOT, env=env, check=True, capture_output=True, text=True)
            .stdout.strip()
            .splitlines()[-1]
        )
        auth = {"X-Euler-API-Key": key}
        db = "PostgreSQL" if env.get("DATABASE_URL", "").startswith("postgres") else "SQLite"
        print(f"loopback, {os.cpu_count()} CPUs (shared), {db}, rate {args.rate} rps for {args.seconds:g} s")
        results = {}
        for kind in args.servers.split(","):
            port = free_port()
            server = start_server(kind, port, env)
            procs.append(server)
            gw = f"http://127.0.0.1:{port}"
            wait_http(gw + "/bench-noop")
            invoke = gw + "/api/v1/agents/bench/invoke/echo"
            base_direct, lat = asyncio.run(
                fixed_rate([(direct + "/echo", {}), (invoke, auth)], args.rate, args.seconds)
            )
            noop_rps, noop_cpu = measured_cpu(server, closed_loop(gw + "/bench-noop", {}, 3), 3)
            gw_rps, gw_cpu = measured_cpu(server, closed_loop(invoke, auth, 3), 3)
            gw_sse = gw + "/api/v1/agents/bench/invoke/sse"
            asyncio.run(sse_pairs(direct + "/sse", gw_sse, auth, 2))  # warm-up
            sse_direct, (ttfb, delays, frames) = asyncio.run(sse_pairs(direct + "/sse", gw_sse, auth, args.sse_runs))
            held = asyncio.run(concurrent_streams(gw_sse, auth, args.streams)) if args.streams else None
            server.terminate()
            server.wait(10)
            results[kind] = {
                "concurrent_streams": held,
                "added_p50_ms": round(pct(lat, 50) - pct(base_direct, 50), 3),
                "added_p99_ms": round(pct(lat, 99) - pct(base_direct, 99), 3),
                "gateway_p50_ms": round(pct(lat, 50), 3),
                "gateway_p99_ms": round(pct(lat, 99), 3),
                "direct_p50_ms": round(pct(base_direct, 50), 3),
                "direct_p99_ms": round(pct(base_direct, 99), 3),
                "ok_calls": len(lat),
                "noop_rps": round(noop_rps),
                "invoke_rps": round(gw_rps),
                "throughput_ratio": round(gw_rps / noop_rps, 3),
                "server_cpu_us_per_noop": round(noop_cpu),
                "server_cpu_us_per_invoke": round(gw_cpu),
                "cpu_capacity_ratio": round(noop_cpu / gw_cpu, 3),
                "sse_ttfb_added_p95_ms": round(pct(ttfb, 95) - pct(sse_direct[0], 95), 3),
                "sse_event_delay_added_p99_ms": round(pct(delays, 99) - pct(sse_direct[1], 99), 3),
                "sse_frames": sorted(set(frames)),
                "sse_direct_ttfb_p95_ms": round(pct(sse_direct[0], 95), 3),
                "sse_direct_event_delay_p99_ms": round(pct(sse_direct[1], 99), 3),
            }
        print(json.dumps(results, indent=2))
        best = min(results, key=lambda k: results[k]["server_cpu_us_per_invoke"])
        print(f"cheaper server per relayed call (CPU per invoke): {best}")
    finally:
        for proc in reversed(procs):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                proc.wait(10)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "upstream":
        import uvicorn

        uvicorn.run(
            upstream_app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning", access_log=False, lifespan="off"
        )
    else:
        main()
