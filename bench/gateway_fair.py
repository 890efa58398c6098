"""Fair use of the gateway: project B's latency while project A floods it with slow calls.

    .venv/bin/python bench/gateway_fair.py [--flood 1000] [--slow 5] [--rate 50] [--seconds 20]

Starts one upstream (raw ASGI under uvicorn) with `/slow` (answers after --slow seconds) and `/fast`
(answers at once), seeds projects A and B through the real services (project, API key, agent on
loopback), starts Euler under uvicorn (as bench/gateway.py does) and measures B calling `/fast` at
a steady --rate for --seconds: first alone, then while A keeps --flood calls to `/slow` pending. Each
of A's callers loops until B's window ends: it calls, and on a 429 waits the Retry-After it was given
(plus jitter) and calls again, as a well-behaved client does. Prints B's p50/p99 and failed calls in
both phases, the ratio of the p99s (target ≤ 1.5×, 0 failed calls for B), and how A's calls were
answered (served, 429 `too_many_concurrent_calls`, other). The per-project cap is
EULER_GATEWAY_MAX_CONCURRENT (default 64), passed through from the environment.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import collections
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.gateway import PY, free_port, pct, start_server, wait_http  # noqa: E402

SLOW_SECONDS = float(os.environ.get("BENCH_FAIR_SLOW", "5"))


# --- the upstream agent (run as `gateway_fair.py upstream PORT`) ---------------------------------
async def upstream_app(scope, receive, send):
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    if scope["path"] == "/slow":
        await asyncio.sleep(SLOW_SECONDS)
    body = b'{"ok":true}'
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


SEED = """
import django; django.setup()
from quotas.services import project_create, apikey_create
from agents.services import agent_create
for name in ("fair-a", "fair-b"):
    p = project_create(name=name)
    _, key = apikey_create(project=p, label="bench")
    agent_create(project=p, fields={"name": "up"}, instances=[{"base_url": "%s"}])
    print(key)
"""


def answer(response: httpx.Response) -> str:
    """`429 too_many_concurrent_calls`: the status and Euler's error code, when there is one."""
    code = ""
    if response.headers.get("content-type", "").startswith("application/json"):
        code = response.json().get("code", "")
    return f"{response.status_code} {code}".strip()


async def steady(client: httpx.AsyncClient, url: str, headers: dict, rate: int, seconds: float):
    """B: calls at a fixed rate (open loop: a slow answer does not delay the next call)."""
    latencies: list[float] = []
    failures: collections.Counter = collections.Counter()

    async def one():
        started = time.perf_counter()
        try:
            response = await client.get(url, headers=headers)
        except httpx.HTTPError as exc:
            failures[type(exc).__name__] += 1
            return
        if response.status_code == 200:
            latencies.append((time.perf_counter() - started) * 1000)
        else:
            failures[answer(response)] += 1

    tasks, start = [], time.perf_counter()
    for i in range(int(rate * seconds)):
        delay = start + i / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.ensure_future(one()))
    await asyncio.gather(*tasks)
    return latencies, failures


async def flood_caller(client: httpx.AsyncClient, url: str, headers: dict, until: float, counts) -> None:
    """One of A's callers: keeps one call pending until `until`, honouring Retry-After on a 429."""
    while time.monotonic() < until:
        try:
            response = await client.get(url, headers=headers)
        except httpx.HTTPError as exc:
            counts[f"error {type(exc).__name__}"] += 1
            await asyncio.sleep(1)
            continue
        if response.status_code == 200:
            counts["served"] += 1
            continue
        counts[answer(response)] += 1
        wait = float(response.headers.get("retry-after") or 1)
        await asyncio.sleep(min(wait * random.uniform(1.0, 1.5), max(0.0, until - time.monotonic())))


async def flood(url: str, key: str, n: int, seconds: float, slow: float) -> dict:
    """A, in a process of its own (its event loop does not delay B's): n callers for `seconds`.

    Calls still held upstream at the end are abandoned: the gateway frees their leases."""
    counts: collections.Counter = collections.Counter()
    limits = httpx.Limits(max_connections=n + 50, max_keepalive_connections=n + 50)
    until = time.monotonic() + seconds
    async with httpx.AsyncClient(timeout=httpx.Timeout(slow + 30), limits=limits) as client:
        callers = [
            asyncio.ensure_future(flood_caller(client, url, {"X-Euler-API-Key": key}, until, counts)) for _ in range(n)
        ]
        await asyncio.sleep(seconds)
        for caller in callers:
            caller.cancel()
        await asyncio.gather(*callers, return_exceptions=True)
    return dict(counts)


def summary(latencies: list[float], failures) -> dict:
    found = {"ok": len(latencies), "failed": sum(failures.values()), "failures": dict(failures)}
    if latencies:
        found |= {"p50_ms": round(pct(latencies, 50), 2), "p99_ms": round(pct(latencies, 99), 2)}
    return found


async def measure(gw: str, keys: list[str], args, procs: list[subprocess.Popen]) -> dict:
    a_url, b_url = gw + "/api/v1/agents/up/invoke/slow", gw + "/api/v1/agents/up/invoke/fast"
    b_auth = {"X-Euler-API-Key": keys[1]}
    timeout = httpx.Timeout(args.slow + 30)
    b_limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
    async with httpx.AsyncClient(timeout=timeout, limits=b_limits) as b_client:
        await steady(b_client, b_url, b_auth, args.rate, 2)  # warm-up: connections, key and route caches
        alone = summary(*await steady(b_client, b_url, b_auth, args.rate, args.seconds))
        load_alone = os.getloadavg()[0]

        seconds = args.ramp + args.seconds + 1
        flooder = subprocess.Popen(
            [PY, __file__, "flood", a_url, str(args.flood), str(seconds), str(args.slow)],
            env={**os.environ, "BENCH_FAIR_KEY": keys[0]},  # not on the command line, where `ps` shows it
            stdout=subprocess.PIPE,
            text=True,
        )
        procs.append(flooder)
        await asyncio.sleep(args.ramp)  # A's calls are all out: the cap is held, the rest refused
        flooded = summary(*await steady(b_client, b_url, b_auth, args.rate, args.seconds))
        load_flood = os.getloadavg()[0]
        a_answers = json.loads(flooder.communicate(timeout=seconds + 30)[0].strip().splitlines()[-1])
    ratio = round(flooded["p99_ms"] / alone["p99_ms"], 2) if "p99_ms" in flooded and "p99_ms" in alone else None
    return {
        "b_alone": alone,
        "b_with_a_flood": flooded,
        "b_p99_ratio": ratio,
        "target_met": ratio is not None and ratio <= 1.5 and flooded["failed"] == 0 and alone["failed"] == 0,
        "a_answers": a_answers,
        "load_avg_1m": {"alone": round(load_alone, 2), "flood": round(load_flood, 2)},
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--flood", type=int, default=1000, help="A's concurrent slow calls")
    parser.add_argument("--slow", type=float, default=5.0, help="seconds the slow upstream takes to answer")
    parser.add_argument("--rate", type=int, default=50, help="B's calls per second")
    parser.add_argument("--seconds", type=float, default=20.0, help="B's window, alone and under the flood")
    parser.add_argument("--ramp", type=float, default=3.0, help="seconds between A's flood and B's window")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="euler-bench-fair-"))
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "EULER_DATA_DIR": str(tmp),
        "DJANGO_DEBUG": "false",
        "DJANGO_SETTINGS_MODULE": "bench.gateway_settings",
        "DJANGO_SECRET_KEY": "bench-" + "x" * 40,
        "EULER_ENCRYPTION_KEYS": "b1:" + base64.b64encode(os.urandom(32)).decode(),
        "EULER_AGENT_ALLOWED_NETWORKS": "127.0.0.0/8",
        "EULER_LOG_LEVEL": "WARNING",
        "BENCH_FAIR_SLOW": str(args.slow),
    }
    env.pop("DATABASE_URL", None)  # a throw-away SQLite database under tmp, never a shared one
    procs: list[subprocess.Popen] = []
    try:
        if "REDIS_URL" not in env:
            from euler import embedded_redis

            procs.append(embedded_redis.start(tmp / "redis.sock"))
        up_port = free_port()
        procs.append(subprocess.Popen([PY, __file__, "upstream", str(up_port)], cwd=ROOT, env=env))
        upstream = f"http://127.0.0.1:{up_port}"
        wait_http(upstream + "/fast")
        subprocess.run([PY, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
        seeded = subprocess.run(
            [PY, "-c", SEED % upstream], cwd=ROOT, env=env, check=True, capture_output=True, text=True
        )
        keys = seeded.stdout.strip().splitlines()[-2:]
        port = free_port()
        procs.append(start_server("uvicorn", port, env))
        gw = f"http://127.0.0.1:{port}"
        wait_http(gw + "/bench-noop")
        cap = env.get("EULER_GATEWAY_MAX_CONCURRENT", "64 (default)")
        print(
            f"loopback, {os.cpu_count()} CPUs (shared), SQLite, uvicorn; A: {args.flood} callers on a {args.slow:g} s "
            f"upstream, cap {cap}; B: {args.rate} rps for {args.seconds:g} s, alone then under A's flood"
        )
        print(json.dumps(asyncio.run(measure(gw, keys, args, procs)), indent=2))
    finally:
        for proc in reversed(procs):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(5)


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "flood":
        url, n, seconds, slow = sys.argv[2:]
        print(json.dumps(asyncio.run(flood(url, os.environ["BENCH_FAIR_KEY"], int(n), float(seconds), float(slow)))))
    elif len(sys.argv) == 3 and sys.argv[1] == "upstream":
        import uvicorn

        uvicorn.run(
            upstream_app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning", access_log=False, lifespan="off"
        )
    else:
        main()
