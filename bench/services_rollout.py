"""A service under calls through the node path: a rolling update and a kill -9 of a replica's agent and container.

    DATABASE_URL=postgres://root@127.0.0.1:5432/test REDIS_URL=redis://127.0.0.1:6379/0 \
        .venv/bin/python bench/services_rollout.py [--calls 10000] [--threads 8]

Issue 38's e2e measure, as a bench: the real platform (tests/e2e/harness.py: web, worker with beat, its own Redis)
on a scratch PostgreSQL database (created and dropped), two real `./euler-node` agents on the local Docker engine,
and a 2-replica busybox httpd service (image `euler-test/busybox`, cached) reached as production reaches it:
`/api/v1/agents/{name}/invoke/…` → gateway → the node's tunnel → the replica. --threads callers alternate a plain
call (the invoke root, its body the revision's text) and an SSE call (`/cgi-bin/sse`: three events, each checked) until
--calls calls were made. Meanwhile, in order: a rolling update (v1 → v2) once 15% of the calls are made, and,
once it rolled out and 50% are made, a kill -9 of one replica's node agent and of its container.

Printed: calls (plain, SSE) and how many failed, each failure's text (a status other than 200, a wrong body, an SSE
stream cut short or with an event missing: the gateway may retry before the first byte, never after); how long the
rollout took; how long after the kill two ready replicas served again (issue 38: ≤ 45 s with the image cached).
Exit status 1 when a call failed.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SSE = '#!/bin/sh\nprintf "Content-Type: text/event-stream\\r\\n\\r\\n"\nfor i in 1 2 3; do printf "data: event %s\\n\\n" "$i"; done\n'
EVENTS = ["data: event 1", "data: event 2", "data: event 3"]


def command(version: str) -> list[str]:
    return ["sh", "-c", "mkdir -p /www/cgi-bin && echo ok > /www/health && "
            f"echo {version} > /www/index.html && cat > /www/cgi-bin/sse <<'EOF'\n{SSE}EOF\n"
            "chmod +x /www/cgi-bin/sse && exec httpd -f -p 8080 -h /www"]  # fmt: skip


class Load:
    def __init__(self, url: str, key: str, name: str, calls: int, threads: int) -> None:
        import httpx

        self.calls, self.done, self.lock = calls, 0, threading.Lock()
        self.results: Counter = Counter()
        self.failures: list[str] = []
        self.base = f"{url}/api/v1/agents/{name}/invoke"
        self.clients = [httpx.Client(headers={"X-Euler-API-Key": key}, timeout=120) for _ in range(threads)]
        self.threads = [
            threading.Thread(target=self._run, args=(c, i), daemon=True) for i, c in enumerate(self.clients)
        ]

    def _take(self) -> bool:
        with self.lock:
            if self.done >= self.calls:
                return False
            self.done += 1
            return True

    def _run(self, http, index: int) -> None:
        import httpx

        sse = index % 2 == 1
        while self._take():
            sse = not sse
            try:
                if sse:
                    with http.stream("GET", f"{self.base}/cgi-bin/sse") as r:
                        events = [ln for ln in r.iter_lines() if ln.startswith("data:")] if r.status_code == 200 else []
                    ok = r.status_code == 200 and events == EVENTS
                    self.results[("sse", r.status_code, ok)] += 1
                    if not ok:
                        self.failures.append(f"sse {r.status_code}: {events}")
                else:
                    r = http.get(self.base)  # the invoke root: no trailing slash
                    body = r.text.strip()
                    ok = r.status_code == 200 and body in ("v1", "v2")
                    self.results[("plain", r.status_code, body if ok else "bad")] += 1
                    if not ok:
                        self.failures.append(f"plain {r.status_code}: {r.text[:200]}")
            except httpx.HTTPError as exc:
                self.results[("sse" if sse else "plain", "error", False)] += 1
                self.failures.append(f"{'sse' if sse else 'plain'} {exc!r}")

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def join(self) -> None:
        for t in self.threads:
            t.join()
        for c in self.clients:
            c.close()


def run(platform, args) -> int:
    import docker

    from quotas.models import Quota
    from quotas.services import project_create
    from tests.e2e.test_jobs import IMAGE, Euler
    from tests.e2e.test_services import service, start_node

    project = project_create(name="services-rollout")
    Quota.objects.filter(project=project).update(max_concurrent_jobs=1000, cpu_core_seconds=10**12)
    euler = Euler(platform, project)
    euler.http.timeout = 120
    try:
        nodes = [start_node(euler), start_node(euler)]
        body = {"name": "web", "image": IMAGE, "command": command("v1"), "port": 8080, "cpu_milli": 250,
                "memory_bytes": 64 << 20, "replicas": 2,
                "readiness": {"path": "/health", "interval_seconds": 1, "failures": 2}}  # fmt: skip
        r = euler.http.post("services", json=body)
        assert r.status_code == 201, r.text

        def ready(revision: int | None = None) -> bool:
            s = service(euler, "web")
            live = [x for x in s["replica_list"] if x["state"] in ("pending", "probing", "ready")]
            ok = s["ready_replicas"] == 2 and len(live) == 2
            return ok and (revision is None or (s["stable_revision"] == revision and all(
                x["revision"] == revision for x in live)))  # fmt: skip

        t0 = time.monotonic()
        platform.wait_for(lambda: ready(1), "2 ready replicas of revision 1", timeout=300)
        print(f"services-rollout: 2 replicas ready {time.monotonic() - t0:.1f} s after the POST on {nodes}", flush=True)

        load = Load(platform.url, euler.key, "web", args.calls, args.threads)
        started = time.monotonic()
        load.start()
        platform.wait_for(lambda: load.done >= args.calls * 0.15, "15% of the calls", timeout=3600, every=0.2)
        t0 = time.monotonic()
        r = euler.http.patch("services/web", json={"command": command("v2")})
        assert r.status_code == 200, r.text
        platform.wait_for(lambda: ready(2), "revision 2 rolled out", timeout=600, every=0.5)
        rollout = time.monotonic() - t0
        print(f"services-rollout: rolled out v1 → v2 in {rollout:.1f} s ({load.done} calls so far)", flush=True)

        platform.wait_for(lambda: load.done >= args.calls * 0.5, "50% of the calls", timeout=3600, every=0.2)
        s = service(euler, "web")
        victim = next(x for x in s["replica_list"] if x["state"] == "ready")
        attempt = euler.job(victim["job"])["attempts"][-1]
        (container,) = euler.containers(attempt["id"])
        t0 = time.monotonic()
        platform.kill_agent(victim["node"])
        docker.from_env().api.kill(container)
        platform.wait_for(lambda: victim["id"] not in {x["id"] for x in service(euler, "web")["replica_list"]
                                                        if x["state"] in ("probing", "ready")} and ready(),
                          "two ready replicas again", timeout=600, every=0.25)  # fmt: skip
        replaced = time.monotonic() - t0
        print(f"services-rollout: killed replica {victim['id']}'s agent and container on {victim['node']}; "
              f"2 ready replicas again after {replaced:.1f} s ({load.done} calls so far)", flush=True)  # fmt: skip
        load.join()
        elapsed = time.monotonic() - started
    finally:
        for agent in list(platform.agents.values()):
            agent.stop()
        euler.cleanup()

    kinds = Counter()
    for (kind, _, _), n in load.results.items():
        kinds[kind] += n
    failed = len(load.failures)
    print(f"services-rollout: {sum(kinds.values())} calls ({kinds['plain']} plain, {kinds['sse']} SSE) in "
          f"{elapsed:.1f} s, {args.threads} threads: {failed} failed", flush=True)  # fmt: skip
    print(f"  answers: {dict(sorted(load.results.items(), key=str))}")
    for line in load.failures[:20]:
        print(f"  failure: {line}")
    print(f"  rollout v1 → v2: {rollout:.1f} s; replacement after kill -9 of agent + container: {replaced:.1f} s")
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10_000)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--keep", help="copy the processes' logs here at the end")
    args = parser.parse_args()

    import logging
    import signal

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a stopped bench still stops its platform (finally)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per call otherwise
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("DJANGO_DEBUG", "true")
    import django

    django.setup()
    from django.db import connection

    from tests.e2e.harness import REPO, Platform
    from tests.e2e.test_services import SERVICE_ENV

    if connection.vendor != "postgresql":
        sys.exit("set DATABASE_URL to PostgreSQL")
    connection.settings_dict["TEST"]["NAME"] = f"euler_bench_svc_{os.getpid()}"
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False)
    platform, failed = Platform(Path(tempfile.mkdtemp(prefix="svcroll-")), env=SERVICE_ENV), 1
    try:
        platform.start(timeout=180)
        failed = run(platform, args)
    finally:
        if args.keep or failed:
            dest = Path(args.keep or REPO / "var" / "services-rollout" / str(os.getpid()))
            platform.collect(dest)
            print(f"process logs kept in {dest}")
        try:
            platform.stop()
        finally:
            connection.close()
            connection.creation.destroy_test_db(old_name, verbosity=0)
    return failed


if __name__ == "__main__":
    sys.exit(main())
