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


async def fixed_rate(targets: list[tuple[str, dict]], rate: int, seconds: float) -> list[list[float]]:
    """Latencies per target; targets are called in turn, each at `rate`, so they share the same moments."""
    latencies: list[list[float]] = [[] for _ in targets]
    errors = [0 for _ in targets]
    limits = httpx.Limits(max_connections=400, max_keepalive_connections=400, keepalive_expiry=4)
    async with httpx.AsyncClient(limits=limits, timeout=10) as client:

        async def one(index: int):
            url, headers = targets[index]
            started = time.perf_counter()
            try:
                response = await client.get(url, headers=headers)
            except httpx.HTTPError:
                errors[index] += 1
                return
            if response.status_code == 200:
                latencies[index].append((time.perf_counter() - started) * 1000)
            else:
                errors[index] += 1

        for _ in range(20):  # warm the pools
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
    if any(errors):
        print(f"failed calls (direct, gateway): {errors}")
    return latencies


async def closed_loop(url: str, headers: dict, seconds: float, concurrency: int = 32) -> float:
    done = 0
    limits = httpx.Limits(max_connections=concurrency, keepalive_expiry=4)
    async with httpx.AsyncClient(limits=limits, timeout=10) as client:
        deadline = time.perf_counter() + seconds

        async def worker():
            nonlocal done
            while time.perf_counter() < deadline:
                try:
                    if (await client.get(url, headers=headers)).status_code == 200:
                        done += 1
                except httpx.HTTPError:
                    pass

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return done / seconds


async def sse(url: str, headers: dict, runs: int) -> tuple[list[float], list[float], list[int]]:
    ttfbs, delays, frames = [], [], []
    async with httpx.AsyncClient(timeout=10) as client:
        for _ in range(runs):
            started = time.perf_counter()
            count, first = 0, None
            async with client.stream("GET", url, headers=headers) as response:
                async for chunk in response.aiter_raw():
                    now = time.time()
                    if first is None:
                        first = (time.perf_counter() - started) * 1000
                    for event in chunk.decode().split("\n\n"):
                        if event.startswith("data:"):
                            delays.append((now - float(event.split()[2])) * 1000)
                    count += 1
            ttfbs.append(first)
            frames.append(count)
    return ttfbs, delays, frames


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
            "euler.asgi:application",
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
        cmd = [PY, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "--verbosity", "0", "euler.asgi:application"]
    return subprocess.Popen(cmd, cwd=ROOT, env=env)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--servers", default="uvicorn,daphne")
    parser.add_argument("--sse-runs", type=int, default=20)
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
        sse_direct = asyncio.run(sse(direct + "/sse", {}, args.sse_runs))
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
            asyncio.run(sse(gw + "/api/v1/agents/bench/invoke/sse", auth, 1))  # warm-up
            ttfb, delays, frames = asyncio.run(sse(gw + "/api/v1/agents/bench/invoke/sse", auth, args.sse_runs))
            server.terminate()
            server.wait(10)
            results[kind] = {
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
            }
        print(f"direct SSE TTFB p95 {pct(sse_direct[0], 95):.3f} ms, event delay p99 {pct(sse_direct[1], 99):.3f} ms")
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
