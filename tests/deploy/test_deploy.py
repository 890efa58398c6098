"""`make test-deploy`: the shipped compose stack built offline and driven end to end through its TLS front.

Not part of `make test` (pyproject's addopts ignore tests/deploy): it builds images and takes minutes. It prints
its figures (image size, start → ready, 200 jobs' submit → succeeded) for BENCHMARKS.md; it asserts no timing.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import ssl
import statistics
import subprocess
import time

import httpx
import pytest
import websockets

from tests.deploy import evidence
from tests.deploy.stack import DOMAIN, IMAGE, Stack, build_images, run

pytestmark = [pytest.mark.deploy, pytest.mark.docker]
FIGURES: dict[str, str] = {}
PASSED: list[str] = []  # the end-to-end test appends its name as its last step
TAG = f"{os.getpid()}"
BUSYBOX = "euler-test/busybox"


def figure(name: str, value: str) -> None:
    FIGURES[name] = value
    print(f"deploy figure: {name}: {value}", flush=True)


@pytest.fixture(scope="module")
def images():
    if subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        pytest.fail("test-deploy needs a Docker engine") if os.environ.get("CI") else pytest.skip("no Docker engine")
    run(["scripts/build-test-image.sh"])
    built = build_images()
    figure("image size", f"{built['image_bytes'] / 1e6:.0f} MB ({IMAGE}, base euler-base/python:3.11-bookworm)")
    figure("build", f"bases {built['bases_s']:.0f} s (0 when already built), image {built['image_s']:.0f} s")
    return built


@pytest.fixture(scope="module")
def stacks():
    # SIGTERM (CI's timeout, a runner's cancel) unwinds like Ctrl-C, so the stacks below are still torn down.
    previous = signal.signal(signal.SIGTERM, _interrupt)
    made: list[Stack] = []
    yield made
    signal.signal(signal.SIGTERM, previous)
    if not PASSED:  # failed, or interrupted: keep what says why before the stacks go (tests/deploy/evidence.py)
        kept = evidence.keep(made, FIGURES, into=evidence.evidence_dir())
        print(f"\ntest-deploy did not pass: compose logs of every service and the figures are in {kept}", flush=True)
    # The test's own containers first: one on a stack's network keeps `down` from removing it (and its volumes).
    run(["docker", "rm", "-f", f"euler-deploy-upstream-{TAG}", f"euler-deploy-nocacert-{TAG}"], check=False)
    for stack in made:
        stack.down()
    print("\n".join(f"deploy figure: {k}: {v}" for k, v in FIGURES.items()))


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def api(stack: Stack, key: str) -> httpx.Client:
    return httpx.Client(
        base_url=stack.url,
        verify=ssl.create_default_context(cafile=str(stack.ca_file)),
        timeout=30,
        headers={"X-Euler-API-Key": key},
        trust_env=False,
    )


def timed(call) -> tuple[httpx.Response, float, float]:
    """(the response, seconds at the client, seconds the web process says it took: `Server-Timing: app;dur=`)."""
    t0 = time.perf_counter()
    response = call()
    took = time.perf_counter() - t0
    _, _, dur = response.headers.get("Server-Timing", "").partition(";dur=")
    return response, took, float(dur or "nan") / 1000


def timed_submit(client: httpx.Client, name: str, command: list[str], **over) -> tuple[int, float, float]:
    """(job id, seconds at the client, seconds in the web process) of one submit of a small job."""
    body = {"name": name, "image": BUSYBOX, "command": command, "cpu_milli": 100, "memory_bytes": 16 * 2**20,
            "timeout_seconds": 300, "network": "none", **over}  # fmt: skip
    response, took, app = timed(lambda: client.post("/api/v1/jobs", json=body))
    assert response.status_code == 201, response.text
    return response.json()["id"], took, app


def spread(total: list[float], app: list[float]) -> str:
    """Medians and p90s in ms: at the client, in the web process, and the rest (TLS, Caddy, the queue before Django)."""

    def q(values: list[float], p: float) -> float:
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, round(p * len(ordered)) - 1)] * 1000

    rest = [t - a for t, a in zip(total, app, strict=True)]
    return (f"client p50 {q(total, 0.5):.0f} ms p90 {q(total, 0.9):.0f} ms; web process p50 {q(app, 0.5):.0f} ms "
            f"p90 {q(app, 0.9):.0f} ms; the rest p50 {q(rest, 0.5):.0f} ms p90 {q(rest, 0.9):.0f} ms")  # fmt: skip


def submit(client: httpx.Client, name: str, command: list[str]) -> int:
    return timed_submit(client, name, command)[0]


def wait_job(client: httpx.Client, job_id: int, timeout=180) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = client.get(f"/api/v1/jobs/{job_id}").json()
        if job["state"] in ("succeeded", "failed", "cancelled", "lost"):
            return job
        time.sleep(0.5)
    raise AssertionError(f"job {job_id} did not end: {job}")


def start_stack(stacks, tmp_path_factory, name, https_port, http_port, **kw) -> tuple[Stack, float]:
    stack = Stack(f"eulerdeploy{TAG}{name}", http_port=http_port, https_port=https_port, **kw)
    stacks.append(stack)
    started = time.monotonic()
    stack.up()
    stack.wait_healthy(["postgres", "redis", "web", "worker-control", "worker", "worker-dispatch", "beat", "caddy"])
    stack.fetch_ca(tmp_path_factory.mktemp(name) / "ca.crt")
    with httpx.Client(verify=ssl.create_default_context(cafile=str(stack.ca_file)), trust_env=False) as c:
        while c.get(f"{stack.url}/readyz").status_code != 200:
            time.sleep(0.5)
    return stack, time.monotonic() - started


def tenant(stack: Stack) -> str:
    stack.manage(
        "createsuperuser",
        "--noinput",
        env={
            "DJANGO_SUPERUSER_USERNAME": "admin",
            "DJANGO_SUPERUSER_PASSWORD": "deploy-test-password",
            "DJANGO_SUPERUSER_EMAIL": "a@example.com",
        },
    )
    stack.manage("createproject", "deploytest", "--owner", "admin")
    return stack.manage("createapikey", "--project", "deploytest").strip().splitlines()[-1]


def enroll_node(stack: Stack, name="compose-node") -> None:
    token = stack.manage("createenrollmenttoken", "--label", "deploy test").strip().splitlines()[-1]
    stack.compose(
        "--profile", "node", "up", "-d", "node", env={"EULER_ENROLLMENT_TOKEN": token, "EULER_NODE_NAME": name}
    )
    stack.wait_healthy(["node"], timeout=120)  # its credential file: enrolled over HTTPS with the internal CA
    print(stack.manage("approvenode", name).strip())


def test_the_shipped_stack_end_to_end(images, stacks, tmp_path_factory):
    stack, ready_s = start_stack(stacks, tmp_path_factory, "a", 18443, 18080)
    figure(
        "stack start -> ready",
        f"{ready_s:.1f} s (compose up to every health check green and /readyz 200 through Caddy)",
    )

    # Plain HTTP only redirects; TLS with an unknown CA fails.
    plain = httpx.get(f"http://localhost:{stack.http_port}/api/v1/jobs", follow_redirects=False, trust_env=False)
    assert plain.status_code in (301, 308) and plain.headers["location"].startswith("https://"), plain
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(f"{stack.url}/readyz", trust_env=False)

    key = tenant(stack)
    client = api(stack, key)
    enroll_node(stack)

    # A job on the node, its log followed over wss:// through the front.
    job_id = submit(client, "hello", ["sh", "-c", "echo hello from the deployed stack; sleep 1; echo bye"])
    ws_ssl = ssl.create_default_context(cafile=str(stack.ca_file))

    async def follow() -> tuple[str, str]:
        url = f"wss://localhost:{stack.https_port}/ws/jobs/{job_id}/logs/"
        text, end = "", ""
        async with websockets.connect(url, ssl=ws_ssl, additional_headers={"X-Euler-API-Key": key}) as ws:
            async for raw in ws:
                message = json.loads(raw)
                if message["type"] == "log":
                    text += message["data"]
                elif message["type"] == "end":
                    end = message["state"]
                    break
        return text, end

    text, end = asyncio.run(asyncio.wait_for(follow(), 180))
    assert end == "succeeded" and "hello from the deployed stack" in text and "bye" in text, (end, text)
    followed = client.get(f"/api/v1/jobs/{job_id}/logs", params={"follow": 1}).text
    assert "bye" in followed

    # An agent through the gateway: an upstream container on the stack's backend network.
    upstream = f"euler-deploy-upstream-{TAG}"
    run(
        [
            "docker",
            "run",
            "-d",
            "--name",
            upstream,
            "--network",
            stack.network("backend"),
            IMAGE,
            "python",
            "-m",
            "http.server",
            "8080",
            "--directory",
            "/app/deploy",
        ]
    )
    response = client.post(
        "/api/v1/agents",
        json={"name": "files", "health_path": "/", "instances": [{"base_url": f"http://{upstream}:8080"}]},
    )
    assert response.status_code == 201, response.text
    deadline = time.monotonic() + 60
    while True:
        invoked = client.get("/api/v1/agents/files/invoke/Caddyfile")
        if invoked.status_code == 200 or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert invoked.status_code == 200 and "reverse_proxy" in invoked.text, invoked.text[:300]

    # The console: password sign-in through the front (Secure cookies, CSRF with the https origin).
    with httpx.Client(base_url=stack.url, verify=ws_ssl, trust_env=False) as browser:
        page = browser.get("/login/")
        csrf = browser.cookies["csrftoken"]
        signed = browser.post(
            "/login/",
            data={"username": "admin", "password": "deploy-test-password", "csrfmiddlewaretoken": csrf},
            headers={"Referer": f"{stack.url}/login/", "Origin": stack.url},
        )
        assert page.status_code == 200 and signed.status_code == 302, (signed.status_code, signed.text[:300])
        assert browser.get("/").status_code == 200

    # An agent without the CA, and one over plain HTTP, never reach the platform.
    token = stack.manage("createenrollmenttoken", "--label", "refused").strip().splitlines()[-1]
    base = [
        "docker",
        "run",
        "--rm",
        "--network",
        stack.network("edge"),
        "-e",
        f"EULER_ENROLLMENT_TOKEN={token}",
        "-e",
        "EULER_NODE_NAME=refused-node",
        "-e",
        "EULER_NODE_STATE_DIR=/tmp/state",
    ]
    no_ca = run(
        [
            *base,
            "--name",
            f"euler-deploy-nocacert-{TAG}",
            "-e",
            f"EULER_CONTROL_PLANE_URL=https://{DOMAIN}",
            IMAGE,
            "timeout",
            "20",
            "./euler-node",
        ],
        check=False,
    )
    assert "CERTIFICATE_VERIFY_FAILED" in no_ca.stderr + no_ca.stdout, no_ca.stderr[-2000:]
    http_only = run([*base, "-e", f"EULER_CONTROL_PLANE_URL=http://{DOMAIN}", IMAGE, "./euler-node"], check=False)
    assert http_only.returncode == 78 and "refusing plain http://" in http_only.stderr, http_only.stderr[-1000:]
    nodes = stack.manage(
        "shell", "-c", "from nodes.models import Node; print(sorted(Node.objects.values_list('name', flat=True)))"
    )
    assert "refused-node" not in nodes and "compose-node" in nodes

    # Scale out: 2 web, 2 workers; 200 jobs, each exactly once, the node never over its capacity.
    stack.compose("up", "-d", "--no-recreate", "--scale", "web=2", "--scale", "worker=2")
    stack.wait_healthy(["web", "worker"])
    time.sleep(6)  # Caddy's dynamic upstreams look the replicas up every 5 s
    # Where a submit's time goes (issue 35): the front alone, a submit with no job running, then the burst.
    front = [timed(lambda: client.get("/healthz")) for _ in range(20)]
    figure("GET /healthz through the front (20)", spread([f[1] for f in front], [f[2] for f in front]))
    quiet = [timed_submit(client, f"quiet-{i}", ["true"], node_selector={"nowhere": "1"}) for i in range(20)]
    figure("20 submits through the front, no job running", spread([q[1] for q in quiet], [q[2] for q in quiet]))
    for job, _, _ in quiet:  # they wait for a node that never comes: cancelled, so the burst runs alone
        assert client.post(f"/api/v1/jobs/{job}/cancel").status_code == 200
    started = time.monotonic()
    burst = [timed_submit(client, f"burst-{i}", ["echo", f"job {i}"]) for i in range(200)]
    ids = [b[0] for b in burst]
    figure("200 submits through the front", f"{time.monotonic() - started:.1f} s")
    figure("200 submits, each (the web process's share: Server-Timing)",
           spread([b[1] for b in burst], [b[2] for b in burst]))  # fmt: skip
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        done = client.get("/api/v1/jobs", params={"state": "succeeded,failed,lost,cancelled", "page_size": 1}).json()
        if done["count"] >= 201 + len(quiet):
            break
        time.sleep(2)
    report = stack.manage("shell", "-c", BURST_REPORT.replace("FIRST", str(ids[0])))
    facts = json.loads(report.strip().splitlines()[-1])
    assert facts["states"] == {"succeeded": 200}, facts
    assert facts["attempts_per_job"] == [1], facts  # each exactly once
    assert facts["max_cpu_milli"] <= facts["capacity_cpu_milli"], facts
    latencies = sorted(facts["latencies"])
    figure(
        "200 jobs submit -> succeeded (2 web, 2 workers, 1 node, via Caddy)",
        f"p50 {statistics.median(latencies):.2f} s, p99 {latencies[int(0.99 * (len(latencies) - 1))]:.2f} s, "
        f"max {max(latencies):.1f} s; "
        f"peak concurrent {facts['max_concurrent']} jobs, {facts['max_cpu_milli']} of {facts['capacity_cpu_milli']} mCPU",
    )
    assert len(stack.compose("ps", "-q", "web").stdout.split()) == 2

    # Backup, then restore into a fresh stack: the same jobs and logs.
    stack.manage("backup", "/var/lib/euler/backup-deploy")
    backup_dir = tmp_path_factory.mktemp("backup")
    web_id = stack.compose("ps", "-q", "web").stdout.split()[0]
    run(["docker", "cp", f"{web_id}:/var/lib/euler/backup-deploy", str(backup_dir)])
    jobs_before = all_jobs(client)
    log_before = client.get(f"/api/v1/jobs/{job_id}/logs").text
    fresh = Stack(
        f"eulerdeploy{TAG}b",
        http_port=18081,
        https_port=18444,
        secret_key=stack.env["DJANGO_SECRET_KEY"],
        encryption_keys=stack.env["EULER_ENCRYPTION_KEYS"],
    )
    stacks.append(fresh)
    fresh.up("postgres", "redis")
    fresh.wait_healthy(["postgres", "redis"])
    os.chmod(backup_dir / "backup-deploy", 0o755)
    for f in (backup_dir / "backup-deploy").iterdir():
        os.chmod(f, 0o644)
    fresh.compose(
        "run",
        "--rm",
        "--no-deps",
        "-v",
        f"{backup_dir / 'backup-deploy'}:/backup:ro",
        "migrate",
        "python",
        "manage.py",
        "restore",
        "/backup",
    )
    fresh.up()
    fresh.wait_healthy(["web", "worker-control", "worker", "worker-dispatch", "beat", "caddy"])
    fresh.fetch_ca(tmp_path_factory.mktemp("b") / "ca.crt")
    restored = api(fresh, key)  # API keys are stored hashed: the same key works on the restored platform
    assert all_jobs(restored) == jobs_before
    assert restored.get(f"/api/v1/jobs/{job_id}/logs").text == log_before

    # Upgrade: the stack at the previous migration state, then migrate and the new services, no row lost.
    upgrade(fresh, restored, jobs_before)
    PASSED.append("end to end")


BURST_REPORT = """
import json
from collections import Counter
from jobs.models import Job, Attempt
from nodes.models import Node
jobs = Job.objects.filter(id__gte=FIRST)
attempts = list(Attempt.objects.filter(job__in=jobs).values('job_id', 'started_at', 'ended_at', 'cpu_milli'))
per_job = Counter(a['job_id'] for a in attempts)
events = sorted([(a['started_at'], a['cpu_milli'], 1) for a in attempts if a['started_at']]
                + [(a['ended_at'], -a['cpu_milli'], -1) for a in attempts if a['ended_at']], key=lambda e: (e[0], e[1]))
cpu = peak = n = peak_n = 0
for _, delta, one in events:
    cpu += delta; n += one; peak = max(peak, cpu); peak_n = max(peak_n, n)
node = Node.objects.get(name='compose-node')
print(json.dumps({
    'states': dict(Counter(jobs.values_list('state', flat=True))),
    'attempts_per_job': sorted(set(per_job.values())),
    'latencies': [(j.ended_at - j.created_at).total_seconds() for j in jobs],
    'max_cpu_milli': peak, 'max_concurrent': peak_n, 'capacity_cpu_milli': node.cpu_milli,
}))
"""


def all_jobs(client: httpx.Client) -> list[tuple]:
    out, page = [], 1
    while True:
        data = client.get("/api/v1/jobs", params={"page": page, "page_size": 500}).json()
        out += [(j["id"], j["name"], j["state"]) for j in data["results"]]
        if not data["next"]:
            return sorted(out)
        page += 1


def upgrade(stack: Stack, client: httpx.Client, jobs_before: list[tuple]) -> None:
    """Roll the schema back to the state before each app's newest migration (what the previous release ran),
    restart on it, then upgrade as docs/deploy.md says: migrate, then web, worker, beat."""
    plan = stack.manage("shell", "-c", PREVIOUS_MIGRATIONS).strip().splitlines()[-1]
    targets = json.loads(plan)
    stack.compose("stop", "web", "worker-control", "worker", "worker-dispatch", "beat")
    for app, name in targets:
        stack.compose("run", "--rm", "--no-deps", "migrate", "python", "manage.py", "migrate", app, name)
    stack.compose("run", "--rm", "--no-deps", "migrate")
    stack.compose("up", "-d", "--force-recreate", "web", "worker-control", "worker", "worker-dispatch", "beat")
    stack.wait_healthy(["web", "worker-control", "worker", "worker-dispatch", "beat", "caddy"])
    assert all_jobs(client) == jobs_before
    figure("upgrade", f"rolled back {len(targets)} newest migrations ({targets}), migrated forward, 0 rows lost")


PREVIOUS_MIGRATIONS = """
import json
from django.db.migrations.loader import MigrationLoader
from django.db import connection
loader = MigrationLoader(connection)
targets = []
for app in ('jobs',):
    names = sorted(n for a, n in loader.disk_migrations if a == app)
    if len(names) >= 2:
        targets.append((app, names[-2]))
print(json.dumps(targets))
"""
