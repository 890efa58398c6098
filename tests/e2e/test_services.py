"""Services end to end (issue 38): web, worker, beat and two real node agents running the replicas' containers.

The replicas are reached through the node path as in production: each instance is euler-node://<attempt>:<port>,
and the gateway (web) and the readiness probes (worker) reach it over the websocket its agent keeps to the
control plane (gateway/tunnel.py); the replicas publish no port, and the host cannot dial the job bridge.
Everything (readiness, rotation, drain, replacement, rolling update, autoscaling) is the real path.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from datetime import UTC, datetime

import docker
import httpx
import pytest

from tests.e2e.test_jobs import FAST, IMAGE, Euler

pytestmark = [pytest.mark.e2e, pytest.mark.docker]

SERVICE_ENV = {
    **FAST,
    "EULER_SERVICE_TICK": "0.5",
    "EULER_SERVICE_DRAIN_SECONDS": "3",
    "EULER_GATEWAY_ROUTE_TTL": "0.2",
    "EULER_AGENT_HEALTH_TICK": "0.5",
    "EULER_SERVICE_SCALE_UP_WINDOW": "3",
    "EULER_SERVICE_SCALE_DOWN_WINDOW": "8",
}


def httpd(version: str) -> list[str]:
    """busybox httpd answering `version` on / and ok on /health; it ends on SIGTERM."""
    return ["sh", "-c", f"mkdir -p /www && echo ok > /www/health && echo {version} > /www/index.html && "
            "exec httpd -f -p 8080 -h /www"]  # fmt: skip


@pytest.fixture
def euler(platform_factory, project, docker_engine):
    e = Euler(platform_factory(env=SERVICE_ENV), project)
    e.http.timeout = httpx.Timeout(120)
    yield e
    # The controller may be starting a replacement as the test ends: stop the agents first, so that none starts a
    # container after the cleanup (one was left running so once).
    for agent in list(e.platform.agents.values()):
        agent.stop()
    e.cleanup()


WAIT = 300  # bounds a wait that never ends only: agents' start-up took over 60 s on the loaded 2-core machine


def start_node(euler) -> str:
    """Euler.node (tests/e2e/test_jobs.py) with room for a slow start-up."""
    import uuid

    from nodes.models import Node
    from nodes.services import enrollment_token_create, node_approve

    name = f"e2e-{uuid.uuid4().hex[:6]}"
    _, token = enrollment_token_create(trust="platform", project=None, label="e2e")
    agent = euler.platform.start_agent(name, token=token)
    node = euler.platform.wait_for(lambda: Node.objects.filter(name=name).first(), f"{name} enrolls", timeout=WAIT)
    node_approve(node=node, trust="platform", public_pool=True)
    euler.platform.wait_for(lambda: "approved" in agent.log(), f"{name} learns it is approved", timeout=WAIT)
    euler.platform.wait_for(lambda: Node.objects.get(name=name).online, f"{name} online", timeout=WAIT)
    euler.node_names.append(name)
    return name


def service(euler, name):
    r = euler.http.get(f"services/{name}")
    assert r.status_code == 200, r.text
    return r.json()


def ready(euler, name, count, revision=None):
    def check():
        s = service(euler, name)
        live = [r for r in s["replica_list"] if r["state"] in ("pending", "probing", "ready")]
        ok = s["ready_replicas"] == count and len(live) == count
        if revision is not None:
            ok = ok and s["stable_revision"] == revision and all(r["revision"] == revision for r in live)
        return ok and s

    return euler.platform.wait_for(check, f"{count} ready replicas of {name}", timeout=WAIT)


class Load:
    """Calls through the gateway from threads until stopped; every answer's status and body kept."""

    def __init__(self, euler, name, threads=2):
        self.url = f"agents/{name}/invoke"
        self.euler, self.stop_event, self.results = euler, threading.Event(), Counter()
        self.failures: list[str] = []
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(threads)]

    def _run(self):
        with httpx.Client(base_url=self.euler.platform.url + "/api/v1/",
                          headers={"X-Euler-API-Key": self.euler.key}, timeout=WAIT) as http:  # fmt: skip
            while not self.stop_event.is_set():
                try:
                    r = http.get(self.url)
                    self.results[(r.status_code, r.text.strip())] += 1
                    if r.status_code != 200:
                        self.failures.append(f"{r.status_code} {r.text[:200]}")
                except httpx.HTTPError as exc:
                    self.failures.append(repr(exc))

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop_event.set()
        for t in self.threads:
            t.join(timeout=WAIT)


@pytest.mark.timeout(900)  # pytest-timeout's 300 s: two agents' start-up alone took 60 s and more on a loaded machine
def test_a_service_serves_through_the_gateway_rolls_out_and_replaces_a_lost_replica(euler):
    first, second = start_node(euler), start_node(euler)
    body = {
        "name": "web", "image": IMAGE, "command": httpd("v1"), "port": 8080, "cpu_milli": 250,
        "memory_bytes": 64 * 2**20, "replicas": 2, "readiness": {"path": "/health", "interval_seconds": 1,
                                                                  "failures": 2},
    }  # fmt: skip
    r = euler.http.post("services", json=body)
    assert r.status_code == 201, r.text
    s = ready(euler, "web", 2, revision=1)
    assert {rep["node"] for rep in s["replica_list"]} == {first, second}  # spread: one replica on each node
    answer = euler.http.get("agents/web/invoke")
    assert answer.status_code == 200 and answer.text.strip() == "v1"

    # A rolling update under load: no call fails, and the answers move from v1 to v2.
    with Load(euler, "web") as load:
        r = euler.http.patch("services/web", json={"command": httpd("v2")})
        assert r.status_code == 200 and r.json()["revision"] == 2, r.text
        ready(euler, "web", 2, revision=2)
        euler.platform.wait_for(lambda: load.results[(200, "v2")] > 20, "calls answered by v2")
    assert not load.failures, load.failures[:5]
    assert load.results[(200, "v1")] > 0 and load.results[(200, "v2")] > 0
    print(f"rolling update: {sum(load.results.values())} calls, {dict(load.results)}")

    # kill -9 of one replica's node agent and its container: the replica is replaced on the other node.
    s = service(euler, "web")
    victim = next(rep for rep in s["replica_list"] if rep["state"] == "ready")
    survivor_node = first if victim["node"] == second else second
    job = euler.job(victim["job"])
    container = job["attempts"][-1]
    euler.platform.kill_agent(victim["node"])
    seen = Counter(e["kind"] for e in service(euler, "web")["events"])
    with Load(euler, "web") as load:
        killed_at = time.monotonic()
        docker.from_env().api.kill(euler.containers(container["id"])[0])
        euler.platform.wait_for(lambda: any(r["id"] == victim["id"] and r["state"] == "ended"
                                            for r in service(euler, "web")["replica_list"]) or
                                victim["id"] not in {r["id"] for r in service(euler, "web")["replica_list"]},
                                "the lost replica ended", timeout=WAIT)  # fmt: skip
        s = ready(euler, "web", 2)
        replaced_in = time.monotonic() - killed_at  # printed for BENCHMARKS.md (the issue's ≤ 45 s), not asserted
        assert all(rep["node"] == survivor_node for rep in s["replica_list"])
        euler.platform.wait_for(lambda: sum(load.results.values()) > 50, "calls answered after the replacement")
    print(
        f"replacement: serving on 2 ready replicas again {replaced_in:.1f} s after the kill; "
        f"{sum(load.results.values())} calls, failures {load.failures[:3]}"
    )
    assert not load.failures, load.failures[:5]
    kinds = Counter(e["kind"] for e in service(euler, "web")["events"])
    # The lost replica is replaced either way: its job seen ended (`replica_failed`) or, first on a loaded machine,
    # its readiness probe failing (`replaced`).
    assert kinds["replica_failed"] + kinds["replaced"] > seen["replica_failed"] + seen["replaced"], kinds
    assert kinds["rolled_out"]

    # Delete: every replica leaves the rotation, drains, stops; the agent is gone with it.
    assert euler.http.delete("services/web").status_code == 202
    euler.platform.wait_for(lambda: euler.http.get("agents/web").status_code == 404, "the service's agent is gone",
                            timeout=WAIT)  # fmt: skip


@pytest.mark.timeout(900)
def test_autoscaling_follows_held_concurrency_and_a_service_scaled_to_zero_serves_its_first_call(euler):
    start_node(euler)
    cgi = ("mkdir -p /www/cgi-bin && printf '#!/bin/sh\\necho Content-Type: text/plain\\necho\\nsleep 2\\necho slow\\n'"
           " > /www/cgi-bin/slow && chmod +x /www/cgi-bin/slow && ")  # fmt: skip
    command = ["sh", "-c", "mkdir -p /www && echo ok > /www/health && echo fast > /www/index.html && " + cgi
               + "exec httpd -f -p 8080 -h /www"]  # fmt: skip
    body = {
        "name": "auto", "image": IMAGE, "command": command, "port": 8080, "cpu_milli": 100,
        "memory_bytes": 32 * 2**20, "replicas": {"min": 0, "max": 3}, "target_concurrency": 2,
        "scale_to_zero_after_seconds": 10, "readiness": {"path": "/health", "interval_seconds": 1},
    }  # fmt: skip
    r = euler.http.post("services", json=body)
    assert r.status_code == 201, r.text

    # 6 calls held in flight (3x the target of 2): up to 3 replicas; once idle, down again and then to zero.
    stop = threading.Event()

    def slow():
        with httpx.Client(base_url=euler.platform.url + "/api/v1/", headers={"X-Euler-API-Key": euler.key},
                          timeout=150) as http:  # fmt: skip
            while not stop.is_set():
                http.get("agents/auto/invoke/cgi-bin/slow")

    threads = [threading.Thread(target=slow, daemon=True) for _ in range(6)]
    load_started = datetime.now(UTC)
    for t in threads:
        t.start()
    try:
        euler.platform.wait_for(lambda: service(euler, "auto")["replicas"]["current"] == 3, "scaled to 3", timeout=WAIT)
        ready(euler, "auto", 3)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=WAIT)
    euler.platform.wait_for(lambda: service(euler, "auto")["replicas"]["current"] == 0, "scaled to zero", timeout=WAIT)
    euler.platform.wait_for(lambda: service(euler, "auto")["ready_replicas"] == 0, "no replica left", timeout=WAIT)
    events = [e for e in reversed(service(euler, "auto")["events"]) if e["kind"] == "autoscaled"]
    scaled = [e["message"] for e in events]
    # Printed for BENCHMARKS.md (the decision ≤ 10 s after the load starts), not asserted.
    to_three = next(datetime.fromisoformat(e["created_at"].replace("Z", "+00:00")) for e in events
                    if " → 3 replicas" in e["message"])  # fmt: skip
    print(f"autoscaling: {scaled}; the decision to 3 came {(to_three - load_started).total_seconds():.1f} s after "
          "the load started")  # fmt: skip
    assert any(m.endswith(" → 3 replicas") or " → 3 replicas" in m for m in scaled)
    assert any(m.startswith("3 → 1") or m.startswith("2 → 1") for m in scaled)  # down first, by the long window
    assert scaled[-1].startswith("1 → 0")

    # From zero: the first call is held until a replica is ready, then answered.
    answer = euler.http.get("agents/auto/invoke", timeout=150)
    assert answer.status_code == 200 and answer.text.strip() == "fast", answer.text
    assert service(euler, "auto")["replicas"]["current"] >= 1
