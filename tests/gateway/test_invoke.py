import json
import time
from collections import Counter

import httpx
import pytest

from agents.services import agent_create
from gateway import recorder
from gateway.models import Invocation

pytestmark = pytest.mark.django_db(transaction=True)


def wait_for(condition, seconds=10.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def register(project, name, *urls_and_weights, **fields):
    instances = [{"base_url": url, "weight": weight} for url, weight in urls_and_weights]
    return agent_create(project=project, fields={"name": name, **fields}, instances=instances)


def test_it_relays_method_path_query_and_body_and_records_the_call(project, upstreams, call):
    up = upstreams("a")
    register(project, "echo", (up.url, 1))
    response = call.post("/api/v1/agents/echo/invoke/echo/deep?x=1&y=%20z", content=b"hello")
    assert response.status_code == 200
    echoed = response.json()
    assert echoed["method"] == "POST"
    assert echoed["path"] == "/echo/deep"
    assert echoed["query"] == "x=1&y=%20z"
    assert echoed["body"] == "hello"
    assert "gateway;dur=" in response.headers["server-timing"]
    assert "set-cookie" not in response.headers
    assert response.headers["x-request-id"] == echoed["headers"]["x-request-id"]
    assert wait_for(lambda: recorder.pending() == 1)
    assert recorder.flush() == 1
    row = Invocation.objects.get()
    assert (row.method, row.path, row.status, row.bytes_in) == ("POST", "/echo/deep", 200, 5)
    assert row.bytes_out == len(response.content) and row.ttfb_ms is not None


def test_it_injects_the_agent_auth_header_and_strips_the_callers_credentials(project, upstreams, call):
    up = upstreams("a")
    register(project, "secret", (up.url, 1), auth_header_name="Authorization", auth_header_value="Bearer upstream")
    response = call.get(
        "/api/v1/agents/secret/invoke/echo",
        headers={
            "Authorization": "Bearer client",
            "Cookie": "sessionid=abc",
            "Connection": "close, X-Hop",
            "X-Hop": "1",
            "X-Custom": "kept",
            "X-Request-ID": "req-42",
        },
    )
    seen = response.json()["headers"]
    assert seen["authorization"] == "Bearer upstream"
    assert "x-euler-api-key" not in seen and "cookie" not in seen and "x-hop" not in seen
    assert seen["x-custom"] == "kept"
    assert seen["x-request-id"] == "req-42"
    assert seen["x-forwarded-for"] == "127.0.0.1"
    assert seen["host"] == up.url.removeprefix("http://")


# The balancer's exact split over a thousand rounds is tests/gateway/test_balancer.py's; here the weights go through
# the whole gateway (registration, route, relay), for which two hundred calls show the same split.
def test_weights_three_to_one_split_two_hundred_calls_seventy_five_to_twenty_five(project, upstreams, call):
    heavy, light = upstreams("heavy"), upstreams("light")
    register(project, "weighted", (heavy.url, 3), (light.url, 1))
    counts = Counter(call.get("/api/v1/agents/weighted/invoke/echo").json()["instance"] for _ in range(200))
    assert abs(counts["heavy"] / 200 - 0.75) <= 0.03
    assert counts["heavy"] + counts["light"] == 200


def test_sse_events_arrive_as_separate_frames_in_order(project, upstreams, gateway, api_key):
    up = upstreams("sse")
    register(project, "stream", (up.url, 1))
    frames = []
    with (
        httpx.Client(timeout=15) as client,
        client.stream(
            "GET", f"{gateway}/api/v1/agents/stream/invoke/sse?n=20&gap=0.05", headers={"X-Euler-API-Key": api_key}
        ) as response,
    ):
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["x-accel-buffering"] == "no"
        assert response.headers["cache-control"] == "no-cache"
        for chunk in response.iter_raw():
            frames.append(chunk)
    events = b"".join(frames).decode().split("\n\n")[:-1]
    assert [int(e.split()[1]) for e in events] == list(range(20))
    # A 50 ms gap between events means each one is relayed on its own, never batched.
    assert len(frames) == 20


def test_a_client_disconnect_closes_the_upstream_stream(project, upstreams, gateway, api_key):
    up = upstreams("slow")
    register(project, "forever", (up.url, 1))
    with (
        httpx.Client(timeout=15) as client,
        client.stream(
            "GET", f"{gateway}/api/v1/agents/forever/invoke/forever", headers={"X-Euler-API-Key": api_key}
        ) as response,
    ):
        for _ in response.iter_raw():
            break
    assert up.stream_closed.wait(10)


def test_a_killed_instance_is_skipped_and_calls_keep_succeeding(project, upstreams, call):
    alive, doomed = upstreams("alive"), upstreams("doomed")
    register(project, "failover", (alive.url, 1), (doomed.url, 1))
    assert call.get("/api/v1/agents/failover/invoke/echo").status_code == 200
    doomed.server.stop()
    statuses = [call.get("/api/v1/agents/failover/invoke/echo").status_code for _ in range(20)]
    assert statuses == [200] * 20


def test_no_instance_reachable_answers_502_upstream_unreachable(project, upstreams, call):
    up = upstreams("gone")
    register(project, "gone", (up.url, 1))
    up.server.stop()
    response = call.get("/api/v1/agents/gone/invoke/echo")
    assert response.status_code == 502
    assert response.json()["code"] == "upstream_unreachable"


def test_no_healthy_instance_answers_503_at_once(project, upstreams, call):
    up = upstreams("sick")
    agent = register(project, "sick", (up.url, 1))
    agent.instances.update(health="unhealthy")
    response = call.get("/api/v1/agents/sick/invoke/echo")
    assert response.status_code == 503
    assert response.json()["code"] == "no_healthy_instance"


def test_upstream_status_and_headers_are_preserved(project, upstreams, call):
    up = upstreams("a")
    register(project, "codes", (up.url, 1))
    assert call.get("/api/v1/agents/codes/invoke/status/418").status_code == 418


def test_another_projects_agent_answers_404(project, other_project, upstreams, gateway, other_api_key):
    up = upstreams("a")
    register(project, "mine", (up.url, 1))
    response = httpx.get(f"{gateway}/api/v1/agents/mine/invoke/echo", headers={"X-Euler-API-Key": other_api_key})
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_a_missing_or_revoked_key_answers_401(project, upstreams, gateway, api_key):
    up = upstreams("a")
    register(project, "locked", (up.url, 1))
    assert httpx.get(f"{gateway}/api/v1/agents/locked/invoke/echo").status_code == 401
    response = httpx.get(
        f"{gateway}/api/v1/agents/locked/invoke/echo", headers={"X-Euler-API-Key": "euler_pk_" + "A" * 43}
    )
    assert response.status_code == 401
    assert response.json()["code"] == "invalid_api_key"


def test_the_dns_rebinding_answer_is_refused_at_connect(project, upstreams, call, monkeypatch, settings):
    from agents import ssrf

    up = upstreams("internal")
    answers = iter([["93.184.216.34"], ["127.0.0.1"], ["127.0.0.1"]])
    monkeypatch.setattr(ssrf, "resolver", lambda host, port: next(answers))
    settings.EULER_AGENT_ALLOWED_NETWORKS = []
    register(project, "rebind", (f"http://rebind.example.com:{up.server.port}", 1))
    response = call.get("/api/v1/agents/rebind/invoke/echo")
    assert response.status_code == 502
    assert response.json()["code"] == "forbidden_address"
    assert up.hits == 0


def test_the_quota_hook_is_asked_on_every_call(project, upstreams, call, monkeypatch):
    from gateway import quota

    asked = []

    def refuse(project_id, agent_name=""):
        asked.append(project_id)
        return False, 7

    monkeypatch.setattr(quota, "check_and_count", refuse)
    up = upstreams("a")
    register(project, "metered", (up.url, 1))
    response = call.get("/api/v1/agents/metered/invoke/echo")
    assert response.status_code == 429
    assert response.headers["retry-after"] == "7"
    assert asked == [project.pk] and up.hits == 0


def test_the_invocation_quota_refuses_calls_past_the_limit_with_retry_after(project, upstreams, call):
    from euler.redis import client
    from quotas import invocations
    from quotas.models import Quota

    for key in client().scan_iter(match=f"euler:inv:*:{project.pk}*"):
        client().delete(key)
    Quota.objects.filter(project=project).update(invocations=3)
    invocations.forget_limit(project.pk)
    up = upstreams("a")
    register(project, "budget", (up.url, 1))
    codes = [call.get("/api/v1/agents/budget/invoke/echo").status_code for _ in range(5)]
    assert codes == [200, 200, 200, 429, 429]
    refused = call.get("/api/v1/agents/budget/invoke/echo")
    assert refused.json()["code"] == "quota_exceeded"
    assert int(refused.headers["retry-after"]) > 0
    assert up.hits == 3
    invocations.flush()
    from quotas.models import UsageEntry

    row = UsageEntry.objects.get(project=project, resource="invocations")
    assert (row.agent_name, row.amount) == ("budget", 3)


def test_unknown_agent_answers_404(call, project):
    assert call.get("/api/v1/agents/nope/invoke/x").json()["code"] == "not_found"


def test_echo_keeps_the_json_body_intact(project, upstreams, call):
    up = upstreams("a")
    register(project, "json", (up.url, 1))
    payload = {"prompt": "你好", "n": 3}
    response = call.post("/api/v1/agents/json/invoke/echo", json=payload)
    assert json.loads(response.json()["body"].encode("latin-1").decode()) == payload
