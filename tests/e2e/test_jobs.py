"""Jobs end to end: web, worker, beat and real `./euler-node` agents on loopback running real containers."""

from __future__ import annotations

import contextlib
import time
import uuid

import docker
import httpx
import pytest

from nodeagent import protocol

pytestmark = [pytest.mark.e2e, pytest.mark.docker]

IMAGE = "euler-test/busybox"
FAST = {
    "EULER_NODE_OFFLINE_AFTER": "3",
    "EULER_NODE_OFFLINE_CHECK_EVERY": "1",
    "EULER_NODE_HEARTBEAT_MIN_INTERVAL": "0.5",
    "EULER_JOB_RETRY_BACKOFF": "0.5",
    "EULER_SCHEDULER_INTERVAL": "1",
}
# PID 1 ignores SIGTERM unless it traps it: these jobs stop at once when told.
TRAP = 'trap "exit 143" TERM; '


class Euler:
    """The platform seen from a user: an API key, jobs over HTTP, and its nodes."""

    def __init__(self, platform, project):
        from quotas.services import apikey_create

        self.platform = platform
        self.project = project
        _, self.key = apikey_create(project=project, label="e2e")
        self.http = httpx.Client(base_url=platform.url + "/api/v1/", headers={"X-Euler-API-Key": self.key}, timeout=30)
        self.node_names: list[str] = []

    def node(self, *, trust: str = "platform", public_pool: bool = True, env: dict | None = None) -> str:
        """Start an agent, approve its node; returns the node name once it is online and approved."""
        from nodes.models import Node
        from nodes.services import enrollment_token_create, node_approve

        name = f"e2e-{uuid.uuid4().hex[:6]}"
        project = self.project if trust != "platform" else None
        _, token = enrollment_token_create(trust=trust, project=project, label="e2e")
        agent = self.platform.start_agent(name, token=token, env=env)
        node = self.platform.wait_for(lambda: Node.objects.filter(name=name).first(), f"{name} enrolls")
        node_approve(node=node, trust=trust, public_pool=public_pool)
        self.platform.wait_for(lambda: "approved" in agent.log(), f"{name} learns it is approved")
        self.platform.wait_for(lambda: Node.objects.get(name=name).online, f"{name} online")
        self.node_names.append(name)
        return name

    def submit(self, command: list[str], **over) -> dict:
        body = {
            "name": "e2e",
            "image": IMAGE,
            "command": command,
            "cpu_milli": 250,
            "memory_bytes": 64 * 1024 * 1024,
            "gpu_count": 0,
            "timeout_seconds": 60,
        } | over
        r = self.http.post("jobs", json=body)
        assert r.status_code == 201, r.text
        return r.json()

    def job(self, job_id: int) -> dict:
        r = self.http.get(f"jobs/{job_id}")
        assert r.status_code == 200, r.text
        return r.json()

    def wait_state(self, job_id: int, states: set[str], *, timeout: float = 60) -> dict:
        """Follow the job through its moves with blocking reads (`GET jobs/{id}/wait?state=<the last seen>`): woken
        by each move, one read per move rather than ten a second, as a user's client would."""
        deadline = time.monotonic() + timeout
        job = self.job(job_id)
        while job["state"] not in states:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"timed out after {timeout:.0f} s waiting for: job {job_id} in {states} "
                                     f"(it is {job['state']})")  # fmt: skip
            r = self.http.get(f"jobs/{job_id}/wait", params={"state": job["state"], "timeout": f"{min(left, 20):.3f}"})
            assert r.status_code == 200, r.text
            job = r.json()
        return job

    def logs(self, job_id: int, **params) -> str:
        r = self.http.get(f"jobs/{job_id}/logs", params=params)
        assert r.status_code == 200, r.text
        return r.text

    def containers(self, attempt_id: int) -> list[str]:
        """Ids of the attempt's containers (the low-level list: no inspect that races the agent's removal)."""
        found = docker.from_env().api.containers(all=True, filters={"label": f"{protocol.LABEL_ATTEMPT}={attempt_id}"})
        # Other test runs on the same engine have attempts of the same id: only this platform's nodes count.
        return [c["Id"] for c in found if (c.get("Labels") or {}).get(protocol.LABEL_NODE) in self.node_names]

    def cleanup(self) -> None:
        client = docker.from_env()
        for name in self.node_names:
            for c in client.api.containers(all=True, filters={"label": f"{protocol.LABEL_NODE}={name}"}):
                with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):  # the agent got there first
                    client.api.remove_container(c["Id"], force=True)


@pytest.fixture
def euler(platform_factory, project, docker_engine):
    e = Euler(platform_factory(env=FAST), project)
    yield e
    e.cleanup()


def test_hello_succeeds_with_its_log_and_exit_3_fails_with_code_3(euler):
    euler.node()
    hello = euler.submit(["sh", "-c", "echo hello from Euler"])
    three = euler.submit(["sh", "-c", "echo bad >&2; exit 3"])
    assert euler.wait_state(hello["id"], {"succeeded", "failed"})["state"] == "succeeded"
    assert "hello from Euler" in euler.logs(hello["id"])
    done = euler.wait_state(three["id"], {"succeeded", "failed"})
    assert (done["state"], done["exit_code"]) == ("failed", 3)
    assert euler.logs(three["id"]) == "bad\n"
    attempt = euler.job(hello["id"])["attempts"][0]
    euler.platform.wait_for(lambda: not euler.containers(attempt["id"]), "the hello container is removed")


def test_each_forbidden_option_is_a_400(platform_factory, project):
    # Refused by the web process alone: one platform without worker and beat serves every option.
    euler = Euler(platform_factory(env=FAST, worker=False, beat=False), project)
    body = {"name": "x", "image": IMAGE, "command": ["true"], "cpu_milli": 100, "memory_bytes": 64 << 20}
    for option in ["privileged", "volumes", "network_mode", "cap_add", "devices", "security_opt"]:
        r = euler.http.post("jobs", json=body | {"timeout_seconds": 10, "gpu_count": 0, option: True})
        assert (r.status_code, r.json()["code"]) == (400, "forbidden_option"), (option, r.text)


def test_a_sleep_past_its_timeout_fails_with_timeout(euler):
    euler.node()
    job = euler.submit(["sh", "-c", TRAP + "sleep 30 & wait"], timeout_seconds=1)
    done = euler.wait_state(job["id"], {"succeeded", "failed"}, timeout=60)
    assert (done["state"], done["reason"]) == ("failed", "timeout")


def test_a_running_job_is_hardened_and_cancel_stops_and_removes_its_container(euler):
    euler.node()
    job = euler.submit(["sh", "-c", TRAP + "sleep 60 & wait"], cpu_milli=500, memory_bytes=96 * 1024 * 1024)
    running = euler.wait_state(job["id"], {"running"})
    attempt_id = running["attempts"][-1]["id"]
    (container_id,) = euler.containers(attempt_id)
    container = docker.from_env().containers.get(container_id)
    host = container.attrs["HostConfig"]
    assert host["CapDrop"] == ["ALL"]
    assert host["SecurityOpt"] == ["no-new-privileges:true"]
    assert host["PidsLimit"] == 512
    assert host["Memory"] == host["MemorySwap"] == 96 * 1024 * 1024
    assert host["NanoCpus"] == 500_000_000
    assert host["Privileged"] is False and not host.get("Binds") and host["NetworkMode"] != "host"
    assert container.labels[protocol.LABEL_JOB] == str(job["id"])
    r = euler.http.post(f"jobs/{job['id']}/cancel")
    assert r.status_code in (200, 202), r.text
    assert euler.wait_state(job["id"], {"cancelled", "failed", "succeeded"})["state"] == "cancelled"
    euler.platform.wait_for(lambda: not euler.containers(attempt_id), "the cancelled container is removed")


def test_env_reaches_a_platform_nodes_container_and_is_not_in_clear_in_the_database(euler):
    from django.db import connection

    euler.node()
    secret = f"s3cret-{uuid.uuid4().hex}"
    job = euler.submit(["sh", "-c", 'echo "token=$TOKEN"'], env={"TOKEN": secret})
    assert "env" not in job
    assert euler.wait_state(job["id"], {"succeeded", "failed"})["state"] == "succeeded"
    assert euler.logs(job["id"]) == f"token={secret}\n"
    with connection.cursor() as cur:
        cur.execute("SELECT * FROM jobs_job WHERE id = %s", [job["id"]])
        row = cur.fetchone()
    assert secret not in repr(row)


def test_a_job_with_env_never_reaches_a_community_node(euler):
    community = euler.node(trust="community")
    plain = euler.submit(["sh", "-c", "echo plain"], network="none")  # sandboxed (runsc: network "none")
    assert euler.wait_state(plain["id"], {"succeeded", "failed"})["state"] == "succeeded"
    assert euler.job(plain["id"])["attempts"][0]["node"] == community
    with_env = euler.submit(["sh", "-c", "echo $TOKEN"], env={"TOKEN": "never-here"})
    # A scheduling pass that saw the job and the community node and placed nothing says why.
    job = euler.platform.wait_for(lambda: (j := euler.job(with_env["id"]))["pending_reason"] and j, "a pending reason")
    assert job["state"] == "queued" and job["attempts"] == []


def test_kill_9_of_an_agent_mid_job_requeues_the_job_to_another_node_where_it_succeeds(euler):
    first = euler.node()
    job = euler.submit(["sh", "-c", TRAP + "sleep 4 & wait; echo finished"], max_retries=1, retry_on=["lost"])
    running = euler.wait_state(job["id"], {"running"})
    assert running["attempts"][0]["node"] == first
    # Killed before the second node starts: its enrollment can outlast the 4 s job on a loaded machine, and a job
    # that ended under a live agent is no test of the requeue (it failed so once under xdist).
    euler.platform.kill_agent(first)
    second = euler.node()
    done = euler.wait_state(job["id"], {"succeeded", "failed", "lost"}, timeout=90)
    assert done["state"] == "succeeded"
    assert [(a["node"], a["state"]) for a in done["attempts"]] == [(first, "lost"), (second, "succeeded")]
    assert euler.logs(done["id"]) == "finished\n"


def test_an_agent_restarted_mid_job_adopts_its_container_and_the_job_succeeds_once(euler):
    name = euler.node()
    job = euler.submit(["sh", "-c", "for i in $(seq 1 40); do echo line $i; sleep 0.1; done"])
    euler.wait_state(job["id"], {"running"})
    euler.platform.wait_for(lambda: "line 3" in euler.logs(job["id"]), "some output is stored")
    assert euler.platform.agents[name].stop() == 0
    agent = euler.platform.restart_agent(name)
    done = euler.wait_state(job["id"], {"succeeded", "failed", "lost"}, timeout=90)
    assert done["state"] == "succeeded"
    assert len(done["attempts"]) == 1
    assert "adopted container of attempt" in agent.log()
    assert euler.logs(job["id"]) == "".join(f"line {i}\n" for i in range(1, 41))


GATED = "echo started; while [ ! -e /tmp/go ]; do sleep 0.05; done; echo done; exit 3"


@pytest.mark.parametrize("container", ["still running", "exited"])
def test_an_agent_back_after_its_node_went_offline_and_the_sweep_ran_reports_the_containers_end_once(euler, container):
    """Forced in order, each step awaited: the agent stops, its node is marked offline, the lost-attempt sweep
    runs, the job ends (or not yet), the agent comes back. One attempt, its exit code, its whole log."""
    from nodes.models import Node

    name = euler.node()
    job = euler.submit(["sh", "-c", GATED])
    attempt_id = euler.wait_state(job["id"], {"running"})["attempts"][-1]["id"]
    euler.platform.wait_for(lambda: "started" in euler.logs(job["id"]), "the first line is stored")
    (cid,) = euler.containers(attempt_id)
    api = docker.from_env().api
    assert euler.platform.agents[name].stop() == 0
    assert "left 1 jobs running; the control plane holds them" in euler.platform.agents[name].log()
    euler.platform.wait_for(lambda: not Node.objects.get(name=name).online, "the node is marked offline")
    held = f"attempts [{attempt_id}] held for its agent's restart"
    control = euler.platform.control_log
    euler.platform.wait_for(lambda: control.read_text().count(held) >= 2, "the offline receiver and a sweep hold it")
    if container == "exited":
        api.exec_start(api.exec_create(cid, ["touch", "/tmp/go"])["Id"])
        assert api.wait(cid)["StatusCode"] == 3  # ended while no agent watched
    agent = euler.platform.restart_agent(name)
    if container == "still running":
        euler.platform.wait_for(lambda: "adopted container of attempt" in agent.log(), "the container is adopted")
        api.exec_start(api.exec_create(cid, ["touch", "/tmp/go"])["Id"])
    done = euler.wait_state(job["id"], {"succeeded", "failed", "lost"}, timeout=90)
    assert (done["state"], done["exit_code"], len(done["attempts"])) == ("failed", 3, 1)
    assert euler.logs(job["id"]) == "started\ndone\n"
