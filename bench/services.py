"""Services through the node tunnel: gateway → node path → replica against gateway → a directly reachable instance.

    .venv/bin/python bench/services.py [--rate 100] [--seconds 5] [--sse-runs 10]

Starts Redis (embedded unless REDIS_URL), two web processes (uvicorn) on one database, an upstream agent (the same
raw ASGI app as bench/gateway.py) and a node agent's tunnel in its own process (nodeagent/tunnel.py, connected to
web 1; its streams dial the upstream on loopback, since no container is involved: entering a namespace is a
once-per-connection cost that keep-alive amortises). Two agents are registered: `direct` (the upstream's URL)
and `tunnel` (`euler-node://<attempt>:<port>`, a running attempt on the node). Prints, for calls through web 2 (the
tunnel is held by web 1, so every frame crosses Redis) and through web 1: p50/p99 at a fixed rate for both
agents side by side, SSE time to first byte (20 events 50 ms apart), closed-loop requests/s, and the CPU each
process spends per call.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.gateway import (  # noqa: E402
    PY,
    closed_loop,
    fixed_rate,
    free_port,
    pct,
    start_server,
    wait_http,
)

SEED = """
import django; django.setup()
from quotas.services import project_create, apikey_create
from agents.models import Agent, AgentInstance
from agents.services import agent_create
from django.utils import timezone
from jobs.models import Attempt, Job
from nodeagent import protocol
from nodes.services import enrollment_token_create, node_enroll
p = project_create(name="bench")
_, key = apikey_create(project=p, label="bench")
agent_create(project=p, fields={"name": "direct"}, instances=[{"base_url": "%(direct)s"}])
_, token = enrollment_token_create(trust="platform", label="bench")
req = protocol.EnrollRequest(token=token, name="bench-node", resources=protocol.Resources(cpu_milli=4000, memory_bytes=8 << 30))
node, credential = node_enroll(req=req)
job = Job.objects.create(project=p, name="replica", image="x", command=["x"], cpu_milli=100, memory_bytes=1 << 26,
                         timeout_seconds=3600, state="running", queued_at=timezone.now())
attempt = Attempt.objects.create(job=job, number=1, node=node, node_name=node.name, cpu_milli=100,
                                 memory_bytes=1 << 26, state="running")
job.current_attempt = attempt
job.save(update_fields=["current_attempt"])
agent = Agent.objects.create(project=p, name="tunnel")
AgentInstance.objects.create(agent=agent, base_url=f"euler-node://{attempt.pk}:%(port)d")
print(key, credential)
"""


def run_agent(url: str, credential: str) -> None:
    """The node agent's tunnel alone; its streams go to loopback (`services.py agent URL CREDENTIAL`)."""
    import socket
    import threading

    from nodeagent.tunnel import Tunnel

    def plain(attempt_id: int):
        sock = socket.socket()
        sock.setblocking(False)
        return sock

    tunnel = Tunnel(base_url=url, credential=lambda: credential, socket_for=plain)
    tunnel.start()
    threading.Event().wait()


def cpu_of(pids: list[int]):
    procs = [psutil.Process(pid) for pid in pids]
    before = [p.cpu_times() for p in procs]

    def used() -> list[float]:
        return [
            (a.user - b.user) + (a.system - b.system)
            for a, b in zip([p.cpu_times() for p in procs], before, strict=True)
        ]

    return used


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--sse-runs", type=int, default=10)
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="euler-bench-svc-"))
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
            from euler import embedded_redis

            procs.append(embedded_redis.start(tmp / "redis.sock"))
        up_port = free_port()
        procs.append(subprocess.Popen([PY, str(ROOT / "bench" / "gateway.py"), "upstream", str(up_port)], env=env))
        direct = f"http://127.0.0.1:{up_port}"
        wait_http(direct + "/echo")
        subprocess.run([PY, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
        seeded = subprocess.run(
            [PY, "-c", SEED % {"direct": direct, "port": up_port}],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        key, credential = seeded.stdout.strip().splitlines()[-1].split()
        auth = {"X-Euler-API-Key": key}
        webs = []
        for _ in range(2):
            port = free_port()
            procs.append(start_server("uvicorn", port, env))
            webs.append((procs[-1], f"http://127.0.0.1:{port}"))
        for _, url in webs:
            wait_http(url + "/bench-noop")
        agent = subprocess.Popen([PY, __file__, "agent", webs[0][1], credential], cwd=ROOT, env=env)
        procs.append(agent)
        db = "PostgreSQL" if env.get("DATABASE_URL", "").startswith("postgres") else "SQLite"
        print(f"loopback, {os.cpu_count()} CPUs (shared), {db}, rate {args.rate} rps for {args.seconds:g} s")

        results = {}
        for label, (_, url) in (
            ("via web 2 (tunnel held by web 1)", webs[1]),
            ("via web 1 (holds the tunnel)", webs[0]),
        ):
            direct_url, tunnel_url = (
                url + "/api/v1/agents/direct/invoke/echo",
                url + "/api/v1/agents/tunnel/invoke/echo",
            )
            deadline = time.monotonic() + 30
            while (answer := httpx.get(tunnel_url, headers=auth, timeout=30)).status_code != 200:  # the tunnel is up
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the tunnel never answered: {answer.status_code} {answer.text}")
                time.sleep(0.5)
            for warm in (direct_url, tunnel_url):  # a fresh process (GC, caches, kept-alive streams) first
                asyncio.run(closed_loop(warm, auth, 3))
            base, lat = asyncio.run(fixed_rate([(direct_url, auth), (tunnel_url, auth)], args.rate, args.seconds))
            pids = [webs[0][0].pid, webs[1][0].pid, agent.pid]
            used = cpu_of(pids)
            direct_rps = asyncio.run(closed_loop(direct_url, auth, 3))
            direct_cpu = used()
            used = cpu_of(pids)
            tunnel_rps = asyncio.run(closed_loop(tunnel_url, auth, 3))
            tunnel_cpu = used()
            sse = "/api/v1/agents/{}/invoke/sse"
            asyncio.run(sse_pairs_auth(url + sse.format("direct"), url + sse.format("tunnel"), auth, 2))  # warm-up
            (d_ttfb, d_delays, _), (t_ttfb, t_delays, frames) = asyncio.run(
                sse_pairs_auth(url + sse.format("direct"), url + sse.format("tunnel"), auth, args.sse_runs)
            )
            per_call = lambda cpu, rps: [round(c * 1e6 / max(1, rps * 3)) for c in cpu]  # noqa: E731
            results[label] = {
                "direct_p50_ms": round(pct(base, 50), 3),
                "direct_p99_ms": round(pct(base, 99), 3),
                "tunnel_p50_ms": round(pct(lat, 50), 3),
                "tunnel_p99_ms": round(pct(lat, 99), 3),
                "added_p50_ms": round(pct(lat, 50) - pct(base, 50), 3),
                "added_p99_ms": round(pct(lat, 99) - pct(base, 99), 3),
                "ok_calls": [len(base), len(lat)],
                "sse_ttfb_direct_p50_ms": round(pct(d_ttfb, 50), 3),
                "sse_ttfb_tunnel_p50_ms": round(pct(t_ttfb, 50), 3),
                "sse_ttfb_added_p50_ms": round(pct(t_ttfb, 50) - pct(d_ttfb, 50), 3),
                "sse_ttfb_added_p95_ms": round(pct(t_ttfb, 95) - pct(d_ttfb, 95), 3),
                "sse_event_delay_added_p99_ms": round(pct(t_delays, 99) - pct(d_delays, 99), 3),
                "sse_events_per_stream": sorted({len(t_delays) // max(1, args.sse_runs)}),
                "closed_loop_rps_direct": round(direct_rps),
                "closed_loop_rps_tunnel": round(tunnel_rps),
                "cpu_us_per_call_direct [web1, web2, agent]": per_call(direct_cpu, direct_rps),
                "cpu_us_per_call_tunnel [web1, web2, agent]": per_call(tunnel_cpu, tunnel_rps),
            }
        print(json.dumps(results, indent=2))
    finally:
        for proc in reversed(procs):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                proc.wait(10)


async def sse_pairs_auth(direct: str, tunnel: str, auth: dict, runs: int):
    """bench.gateway.sse_pairs calls its first URL without the key: here both go through the gateway."""
    import httpx

    from bench.gateway import sse_stream

    async with httpx.AsyncClient(timeout=10) as client:
        pairs = [
            await asyncio.gather(sse_stream(client, direct, auth), sse_stream(client, tunnel, auth))
            for _ in range(runs)
        ]
    split = []
    for part in ([p[0] for p in pairs], [p[1] for p in pairs]):
        split.append(([r[0] for r in part], [d for r in part for d in r[1]], [r[2] for r in part]))
    return split


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "agent":
        run_agent(sys.argv[2], sys.argv[3])
    else:
        main()
