"""The node tunnel end to end: a long-running job serving HTTP on a real `./euler-node`, reached by the gateway
through the websocket its agent keeps to web process 1, from calls that land on web process 1 or 2.

The container publishes no port and the node opens none; the agent connects inside the container's network
namespace. A plain call and an SSE stream go through, the instance's health checks (in the worker) go through too,
and once the job ends its instance is refused a stream (the node's right ends with the attempt).
"""

from __future__ import annotations

import httpx
import pytest

from tests.e2e.harness import FEATURE_TICKS, free_port, web_command
from tests.e2e.test_jobs import FAST, Euler

pytestmark = [pytest.mark.e2e, pytest.mark.docker]

PORT = 8080
SSE = '#!/bin/sh\nprintf "Content-Type: text/event-stream\\r\\n\\r\\n"\nfor i in 1 2 3; do printf "data: event %s\\n\\n" "$i"; sleep 0.3; done\n'
SERVE = (
    "mkdir -p /tmp/www/cgi-bin && echo hello-replica > /tmp/www/index.html && "
    f"cat > /tmp/www/cgi-bin/sse <<'EOF'\n{SSE}EOF\n"
    f"chmod +x /tmp/www/cgi-bin/sse && exec httpd -f -p {PORT} -h /tmp/www"
)


@pytest.fixture
def euler(platform_factory, project, docker_engine):
    e = Euler(platform_factory(env={**FAST, **FEATURE_TICKS}), project)  # the worker's health checks
    yield e
    e.cleanup()


def _answers(url: str) -> bool:
    try:
        return httpx.get(url + "/readyz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _instance(project, attempt_id: int):
    from agents.models import Agent, AgentInstance

    agent = Agent.objects.create(project=project, name="replica", health_path="/index.html", health_interval_s=1)
    return AgentInstance.objects.create(agent=agent, base_url=f"euler-node://{attempt_id}:{PORT}")


def test_a_replica_behind_its_nodes_tunnel_serves_through_the_gateway_of_either_web_process(euler):
    platform = euler.platform
    port2 = free_port()
    platform.spawn("web2", web_command(port2))
    web2 = f"http://127.0.0.1:{port2}"
    platform.wait_for(lambda: _answers(web2), "web2 answers /readyz", timeout=60)

    name = euler.node()  # its agent talks to web 1 only: its tunnel is held there
    platform.wait_for(lambda: "node tunnel open" in platform.agents[name].log(), "the agent opens its tunnel")
    job = euler.submit(["sh", "-c", SERVE], timeout_seconds=600)
    attempt = euler.wait_state(job["id"], {"running"}, timeout=90)["attempts"][0]
    (container_id,) = euler.containers(attempt["id"])
    import docker

    assert not docker.from_env().api.inspect_container(container_id)["NetworkSettings"].get("Ports")
    instance = _instance(euler.project, attempt["id"])

    headers = {"X-Euler-API-Key": euler.key}
    invoke = "/api/v1/agents/replica/invoke"
    with httpx.Client(headers=headers, timeout=30) as http:
        first = platform.wait_for(
            lambda: (r := http.get(f"{web2}{invoke}/index.html")).status_code == 200 and r,
            "the replica answers through web 2 (httpd starting)",
        )
        assert first.text == "hello-replica\n"
        for url in (platform.url, web2):  # the tunnel's own process, and the other one (through Redis)
            for _ in range(20):
                r = http.get(f"{url}{invoke}/index.html?n=1")
                assert (r.status_code, r.text) == (200, "hello-replica\n"), r.text

        with http.stream("GET", f"{web2}{invoke}/cgi-bin/sse") as stream:
            assert stream.status_code == 200
            assert stream.headers["content-type"].startswith("text/event-stream")
            events = [line for line in stream.iter_lines() if line.startswith("data:")]
        assert events == ["data: event 1", "data: event 2", "data: event 3"]

        from agents.models import AgentInstance

        platform.wait_for(  # the worker's health checks reach it through the tunnel too
            lambda: AgentInstance.objects.get(pk=instance.pk).health == "healthy", "the instance is healthy"
        )

        r = euler.http.post(f"jobs/{job['id']}/cancel")
        assert r.status_code in (200, 202), r.text
        euler.wait_state(job["id"], {"cancelled"}, timeout=60)
        # The job is cancelled at once; its attempt (and the node's right to serve it) ends when the node reports
        # the container gone, after the stop's grace: wait for that event, not the job's state.
        platform.wait_for(
            lambda: euler.job(job["id"])["attempts"][0]["state"] not in ("assigned", "running"),
            "the attempt ends (the container stopped)",
            timeout=90,
        )
        r = http.get(f"{web2}{invoke}/index.html")
        assert r.status_code in (502, 503), r.text  # no stream for an ended attempt
