"""Every stop has a grace, end to end (issue 36): web, worker, beat and real `./euler-node` agents running real
containers. A cancel's SIGTERM and stop file, a job that ignores SIGTERM, the timeout warning, and a lender taking
the machine back with `euler-node reclaim` (its job requeued elsewhere without spending a retry; the node takes
nothing until resumed); and a lender's modified agent that tries to lift its lender's reclaim by hand."""

from __future__ import annotations

import subprocess
import uuid

import httpx
import pytest

from nodeagent import protocol
from tests.e2e.harness import REPO
from tests.e2e.test_jobs import FAST, Euler

pytestmark = [pytest.mark.e2e, pytest.mark.docker]

# A job that says when it runs, then waits in a way SIGTERM interrupts at once (`wait` on a background sleep).
READY = "echo ready; "
LOOP = "while true; do sleep 1 & wait $!; done"


@pytest.fixture
def euler(platform_factory, project, docker_engine):
    e = Euler(platform_factory(env=FAST), project)
    yield e
    e.cleanup()


def running(euler: Euler, job_id: int) -> dict:
    """The job once its command has started (it printed `ready`): waits on its log, not on a clock."""
    euler.wait_state(job_id, {"running"})
    euler.platform.wait_for(lambda: "ready" in euler.logs(job_id), f"job {job_id} prints ready")
    return euler.job(job_id)


def test_a_cancel_sends_sigterm_and_the_job_reads_cancel_in_its_stop_file_and_exits_0(euler):
    euler.node()
    script = "trap 'echo stopped: $(cat /run/euler/stop); exit 0' TERM; " + READY + LOOP
    job = euler.submit(["sh", "-c", script], stop_grace_seconds=30)
    attempt = running(euler, job["id"])["attempts"][0]
    assert euler.http.post(f"jobs/{job['id']}/cancel").status_code == 200
    euler.platform.wait_for(lambda: euler.job(job["id"])["attempts"][0]["state"] == "cancelled", "the attempt ends")
    ended = euler.job(job["id"])
    assert ended["state"] == "cancelled"
    assert (ended["attempts"][0]["exit_code"], ended["attempts"][0]["stop_reason"]) == (0, "cancelled")
    assert "stopped: cancel" in euler.logs(job["id"])
    euler.platform.wait_for(lambda: not euler.containers(attempt["id"]), "the container is removed")


def test_a_job_that_ignores_sigterm_is_killed_after_its_grace(euler):
    euler.node()
    job = euler.submit(["sh", "-c", 'trap "" TERM; ' + READY + "while true; do sleep 1; done"], stop_grace_seconds=2)
    attempt = running(euler, job["id"])["attempts"][0]
    assert euler.http.post(f"jobs/{job['id']}/cancel").status_code == 200
    euler.platform.wait_for(lambda: euler.job(job["id"])["attempts"][0]["state"] == "cancelled", "the attempt ends")
    assert euler.job(job["id"])["attempts"][0]["exit_code"] == 137  # SIGKILL: it never left on SIGTERM
    euler.platform.wait_for(lambda: not euler.containers(attempt["id"]), "the container is removed")


def test_the_timeout_warning_arrives_before_the_timeout(euler):
    euler.node()
    script = "trap 'echo warned' USR2; trap 'echo stopped: $(cat /run/euler/stop); exit 1' TERM; " + READY + LOOP
    job = euler.submit(["sh", "-c", script], timeout_seconds=6, warn_before_timeout_seconds=4, warn_signal="SIGUSR2")
    done = euler.wait_state(job["id"], {"succeeded", "failed"})
    assert (done["state"], done["reason"]) == ("failed", "timeout")
    log = euler.logs(job["id"])
    assert "warned" in log and "stopped: timeout" in log
    assert log.index("warned") < log.index("stopped: timeout")


def euler_node(platform, name: str, *args: str) -> subprocess.CompletedProcess:
    """`./euler-node ARGS` on the node's host: its state dir, its control plane."""
    agent = platform.agents[name]
    env = {
        **platform.base_env(),
        "EULER_CONTROL_PLANE_URL": platform.url,
        "EULER_NODE_NAME": name,
        "EULER_NODE_STATE_DIR": str(agent.state_dir),
    }
    return subprocess.run(
        [str(REPO / "euler-node"), *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_a_reclaim_requeues_the_job_elsewhere_without_a_retry_and_the_node_waits_for_resume(euler):
    from nodes.models import Node

    first = euler.node()
    job = euler.submit(["sh", "-c", 'trap "exit 0" TERM; ' + READY + LOOP], max_retries=0, stop_grace_seconds=20)
    assert running(euler, job["id"])["attempts"][0]["node"] == first
    second = euler.node()

    done = euler_node(euler.platform, first, "reclaim", "--grace", "5", "--json")
    assert done.returncode == 0, done.stderr
    assert '"reclaimed": true' in done.stdout and '"stopped": 1' in done.stdout

    moved = euler.platform.wait_for(
        lambda: len((j := euler.job(job["id"]))["attempts"]) == 2 and j["state"] == "running" and j,
        "the job runs again elsewhere",
    )
    old, new = moved["attempts"]
    assert (old["state"], old["reason"], old["stop_reason"]) == ("reclaimed", "reclaimed", "reclaim")
    assert new["node"] == second and moved["retries_used"] == 0
    assert any(e["reason"] == "reclaimed" and "retry budget untouched" in e["message"] for e in moved["events"])

    # Unavailable until resumed: a job only the reclaimed node could take waits, saying why; after resume it runs.
    pinned = euler.submit(["true"], node_selector={"box": "first"})
    Node.objects.filter(name=first).update(labels={"box": "first"})
    euler.platform.wait_for(lambda: "draining" in euler.job(pinned["id"])["pending_reason"], "a pending reason")
    assert Node.objects.get(name=first).reclaimed_at is not None
    done = euler_node(euler.platform, first, "resume")
    assert done.returncode == 0, done.stderr
    assert euler.wait_state(pinned["id"], {"succeeded", "failed"})["state"] == "succeeded"
    node = Node.objects.get(name=first)
    assert (node.reclaimed_at, node.reclaim_count) == (None, 1)


def test_a_nodes_own_crafted_requests_cannot_lift_its_lenders_reclaim(platform_factory, project, owner):
    from nodes.models import Node
    from nodes.services import enrollment_token_create, node_approve
    from quotas.services import apikey_create

    platform = platform_factory(env={"EULER_NODE_OFFLINE_AFTER": "600", "EULER_SCHEDULER_INTERVAL": "1"})
    name = f"hand-{uuid.uuid4().hex[:6]}"
    resources = {"cpu_milli": 4000, "memory_bytes": 8 << 30, "disk_bytes": 20 << 30, "gpus": []}
    node_http = httpx.Client(base_url=platform.url + "/node-api/v1/", timeout=60, trust_env=False)
    # The owner lends a machine to their own project (the lender: who created its enrollment token).
    _, token = enrollment_token_create(trust="untrusted", project=project, label="hand", by=owner)
    r = node_http.post(protocol.PATH_ENROLL, json={"token": token, "name": name, "resources": resources})
    assert r.status_code == 201, r.text
    node_http.headers["Authorization"] = f"Bearer {r.json()['credential']}"
    node = node_approve(node=Node.objects.get(name=name), trust="untrusted", public_pool=False)
    _, key = apikey_create(project=project, by=owner, label="lender")
    lender = httpx.Client(base_url=platform.url + "/api/v1/", headers={"X-Euler-API-Key": key}, timeout=30)

    assert lender.post(f"nodes/{node.pk}/reclaim").json()["reclaimed_by"] == "lender"
    beat = {"resources": resources, "running": []}
    attempts = [
        node_http.post(protocol.PATH_RESUME, json={}),
        node_http.post(protocol.PATH_RECLAIM, json={"grace": 0}),  # its own on top: the lender's stays
        node_http.post(protocol.PATH_RESUME, json={}),
        node_http.post(protocol.PATH_HEARTBEAT, json=beat | {"reclaimed": False}),
        node_http.post(protocol.PATH_HEARTBEAT, json=beat),
        node_http.post(f"{platform.url}/api/v1/nodes/{node.pk}/resume"),  # the public API: not its credential
    ]
    codes = [(a.status_code, a.json().get("code")) for a in attempts]
    assert codes[0] == (409, "reclaimed_by_higher") and codes[2] == (409, "reclaimed_by_higher")
    assert codes[1][0] == 200 and attempts[1].json()["reclaimed_by"] == "lender"
    assert codes[3] == (400, "invalid_heartbeat") and codes[4][0] == 200
    assert codes[5][0] in (401, 403)
    row = Node.objects.get(pk=node.pk)
    assert (row.reclaimed_at is not None, row.reclaimed_by, row.reclaim_count) == (True, "lender", 1)
    # And it is given no work: a job waits with a pending reason while the node polls.
    user = Euler(platform, project)
    job = user.submit(["true"], pool="own")
    platform.wait_for(lambda: "draining" in user.job(job["id"])["pending_reason"], "the job's pending reason")
    assert node_http.post(protocol.PATH_POLL, json={"wait": 0}).json()["assignments"] == []
    assert lender.post(f"nodes/{node.pk}/resume").json()["reclaimed"] is False
