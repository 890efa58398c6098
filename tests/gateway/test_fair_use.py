"""Fair use of the gateway: body limit, per-project concurrent calls, per-key calls per minute; Bearer keys."""

import asyncio
import threading
import time
import uuid

import httpx
import pytest

from agents.services import agent_create
from euler.redis import client as redis_client
from gateway import limits

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _fresh_counters():
    r = redis_client()
    for key in r.scan_iter(match="euler:gw:*"):
        r.delete(key)
    limits.forget()
    yield
    limits.forget()


def wait_for(condition, seconds=15.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def register(project, name, url, **fields):
    return agent_create(project=project, fields={"name": name, **fields}, instances=[{"base_url": url}])


def in_flight(project_id: int) -> int:
    r = redis_client()
    key = f"euler:gw:conc:{project_id}"
    r.zremrangebyscore(key, "-inf", time.time())
    return r.zcard(key)


def test_a_body_over_the_limit_answers_413_and_never_reaches_the_agent(project, upstreams, call, settings):
    settings.EULER_GATEWAY_MAX_BODY_BYTES = 1000
    up = upstreams("a")
    register(project, "small", up.url)
    response = call.post("/api/v1/agents/small/invoke/echo", content=b"x" * 1001)
    assert response.status_code == 413
    assert response.json()["code"] == "body_too_large" and response.json()["limit"] == 1000
    assert response.headers["x-content-type-options"] == "nosniff"
    assert call.post("/api/v1/agents/small/invoke/echo", content=b"x" * 1000).status_code == 200
    assert up.hits == 1


def test_a_chunked_body_is_counted_as_it_arrives(project, upstreams, call, settings):
    settings.EULER_GATEWAY_MAX_BODY_BYTES = 100_000
    up = upstreams("a")
    register(project, "chunked", up.url)

    def chunks(total):
        for _ in range(total // 10_000):
            yield b"y" * 10_000

    refused = call.post("/api/v1/agents/chunked/invoke/echo", content=chunks(200_000))
    assert refused.status_code == 413 and refused.json()["code"] == "body_too_large"
    assert up.hits == 0
    relayed = call.post("/api/v1/agents/chunked/invoke/echo", content=chunks(50_000))
    assert relayed.status_code == 200
    assert relayed.json()["body"] == "y" * 50_000


def test_the_projects_concurrent_calls_are_capped_across_gateways_and_freed_when_clients_leave(
    project, upstreams, gateway, api_key, settings
):
    from asgiref.sync import SyncToAsync
    from django.db import connections

    from config.asgi import application
    from quotas.models import Quota
    from tests.gateway.servers import ServerThread

    Quota.objects.filter(project=project).update(max_concurrent_invocations=2)
    up = upstreams("a")
    register(project, "capped", up.url)
    second = ServerThread(application).start()  # another gateway: the cap is shared through Redis
    headers = {"X-Euler-API-Key": api_key}
    try:
        streams = []
        for base in (gateway, second.url):
            client = httpx.Client(base_url=base, headers=headers, timeout=15)
            stream = client.stream("GET", "/api/v1/agents/capped/invoke/forever")
            response = stream.__enter__()
            assert response.status_code == 200
            chunks = response.iter_raw()  # kept: a dropped iterator closes the stream
            next(chunks)
            streams.append((client, stream, chunks))
        assert in_flight(project.pk) == 2
        refused = httpx.get(f"{second.url}/api/v1/agents/capped/invoke/echo", headers=headers)
        assert refused.status_code == 429
        assert refused.json()["code"] == "too_many_concurrent_calls" and refused.json()["limit"] == 2
        assert refused.headers["retry-after"] == "1"
        for client, stream, _ in streams:  # the clients go away mid-stream
            stream.__exit__(None, None, None)
            client.close()
        assert wait_for(lambda: in_flight(project.pk) == 0)
        assert httpx.get(f"{gateway}/api/v1/agents/capped/invoke/echo", headers=headers).status_code == 200
        # The slot is given back after the last byte went out: the client can have it first. Wait, not sample.
        assert wait_for(lambda: in_flight(project.pk) == 0)
    finally:
        second.stop()
        SyncToAsync.single_thread_executor.submit(connections.close_all).result()


def test_another_projects_calls_do_not_count_against_the_cap(project, other_project, upstreams, gateway, settings):
    from quotas.services import apikey_create

    settings.EULER_GATEWAY_MAX_CONCURRENT = 1
    up = upstreams("a")
    register(project, "mine", up.url)
    register(other_project, "theirs", up.url)
    _, mine = apikey_create(project=project, label="mine")
    _, theirs = apikey_create(project=other_project, label="theirs")
    with httpx.Client(base_url=gateway, headers={"X-Euler-API-Key": mine}, timeout=15) as client:
        with client.stream("GET", "/api/v1/agents/mine/invoke/forever") as held:
            chunks = held.iter_raw()
            next(chunks)
            assert client.get("/api/v1/agents/mine/invoke/echo").status_code == 429
            other = httpx.get(f"{gateway}/api/v1/agents/theirs/invoke/echo", headers={"X-Euler-API-Key": theirs})
            assert other.status_code == 200


async def test_a_lease_expires_unless_renewed(project, settings):
    settings.EULER_GATEWAY_LEASE_SECONDS = 30
    lease = await limits.acquire(project.pk, 1)
    assert lease and await limits.acquire(project.pk, 1) is None
    assert await limits.renew() == 1
    score = redis_client().zscore(f"euler:gw:conc:{project.pk}", lease)
    assert score > time.time() + 25
    redis_client().zadd(f"euler:gw:conc:{project.pk}", {lease: time.time() - 1})  # as if its process died
    assert await limits.in_flight(project.pk) == 0
    again = await limits.acquire(project.pk, 1)
    assert again
    await limits.release(lease)
    await limits.release(again)
    await asyncio.gather(*list(limits._releasing))
    assert await limits.in_flight(project.pk) == 0


def test_a_key_with_an_rpm_limit_gets_429_past_it_and_other_keys_do_not(project, upstreams, gateway, api_key):
    from quotas.services import apikey_create

    up = upstreams("a")
    register(project, "rpm", up.url)
    _, limited = apikey_create(project=project, label="limited", rpm_limit=2)
    url = f"{gateway}/api/v1/agents/rpm/invoke/echo"
    codes = [httpx.get(url, headers={"X-Euler-API-Key": limited}).status_code for _ in range(2)]
    assert codes == [200, 200]
    refused = httpx.get(url, headers={"X-Euler-API-Key": limited})
    assert refused.status_code == 429
    assert refused.json()["code"] == "rpm_limit_exceeded" and refused.json()["limit"] == 2
    assert 1 <= int(refused.headers["retry-after"]) <= 60
    assert httpx.get(url, headers={"X-Euler-API-Key": api_key}).status_code == 200
    assert up.hits == 3


def test_rpm_retry_after_is_when_the_window_has_room_again():
    assert limits.rpm_retry_after(10, 10, 0, elapsed=15.0) == 45
    # 10 of the previous minute, 0 now, limit 5: room once at most 4 of the previous minute's 10 are in view.
    assert limits.rpm_retry_after(5, 0, 10, elapsed=10.0) == 26
    assert limits.rpm_retry_after(5, 0, 10, elapsed=59.5) == 1
    # The turn of the minute: both of the previous minute's calls still (almost) wholly in view.
    assert limits.rpm_retry_after(2, 0, 2, elapsed=0.05) == 30


async def _rpm_at(previous: int, current: int, limit: int, elapsed: float) -> list:
    """The window script itself, against Redis, at `elapsed` seconds into a minute."""
    r = limits.async_client()
    keys = (f"euler:gw:rpm:test:{uuid.uuid4().hex}:now", f"euler:gw:rpm:test:{uuid.uuid4().hex}:before")
    await r.set(keys[1], previous)
    if current:
        await r.set(keys[0], current)
    try:
        return await r.eval(limits._RPM, 2, *keys, limit, 1 - elapsed / limits.WINDOW)
    finally:
        await r.delete(*keys)


async def test_a_key_that_spent_its_limit_just_before_the_minutes_turn_gets_nothing_just_after_it():
    """The minute boundary forced, not hoped for: `limit` calls at :59.9 leave no room at :00.05."""
    assert (await _rpm_at(previous=2, current=0, limit=2, elapsed=0.05))[0] == 0
    assert (await _rpm_at(previous=2, current=0, limit=2, elapsed=30.0))[0] == 1  # half of them in view: room for one
    assert (await _rpm_at(previous=2, current=1, limit=2, elapsed=30.0))[0] == 0
    assert (await _rpm_at(previous=10, current=0, limit=10, elapsed=6.0))[0] == 1  # 9 of 10 in view: one more
    assert (await _rpm_at(previous=10, current=0, limit=10, elapsed=5.9))[0] == 0


def test_an_api_key_is_created_with_an_rpm_limit_and_listed_with_it(project, call):
    created = call.post("/api/v1/api-keys", json={"label": "ci", "rpm_limit": 30})
    assert created.status_code == 201 and created.json()["rpm_limit"] == 30
    bad = call.post("/api/v1/api-keys", json={"label": "ci", "rpm_limit": 0})
    assert bad.status_code == 400
    listed = call.get("/api/v1/api-keys").json()
    rows = listed["results"] if isinstance(listed, dict) else listed
    assert {row["rpm_limit"] for row in rows} == {None, 30}


def test_an_euler_key_as_bearer_token_authenticates_and_is_never_forwarded(project, upstreams, gateway, api_key):
    up = upstreams("a")
    register(project, "bearer", up.url)
    url = f"{gateway}/api/v1/agents/bearer/invoke/echo"
    response = httpx.get(url, headers={"Authorization": f"Bearer {api_key}"})
    assert response.status_code == 200
    assert "authorization" not in response.json()["headers"]
    assert api_key not in response.text
    wrong = httpx.get(url, headers={"Authorization": "Bearer euler_pk_wrong"})
    assert wrong.status_code == 401 and wrong.json()["code"] == "invalid_api_key"
    # A token that is not an Euler key is the agent's business: it passes through, as before.
    passed = httpx.get(url, headers={"Authorization": "Bearer sk-upstream", "X-Euler-API-Key": api_key})
    assert passed.json()["headers"]["authorization"] == "Bearer sk-upstream"
    assert httpx.get(url, headers={"Authorization": "Bearer sk-upstream"}).status_code == 401


def test_the_agents_own_auth_header_replaces_a_bearer_euler_key(project, upstreams, gateway, api_key):
    up = upstreams("a")
    register(project, "owned", up.url, auth_header_name="Authorization", auth_header_value="Bearer agent-secret")
    response = httpx.get(f"{gateway}/api/v1/agents/owned/invoke/echo", headers={"Authorization": f"Bearer {api_key}"})
    assert response.status_code == 200
    assert response.json()["headers"]["authorization"] == "Bearer agent-secret"


def test_a_held_stream_keeps_its_lease_while_it_flows(project, upstreams, call):
    up = upstreams("a")
    register(project, "sse", up.url)
    seen = []

    def read():
        with call.stream("GET", "/api/v1/agents/sse/invoke/sse?n=5&gap=0.05") as response:
            seen.append(response.headers["content-type"])
            seen.append(in_flight(project.pk))
            seen.append(b"".join(response.iter_raw()).count(b"data: "))

    reader = threading.Thread(target=read)
    reader.start()
    reader.join(30)
    assert seen == ["text/event-stream", 1, 5]
    assert wait_for(lambda: in_flight(project.pk) == 0)


def test_an_unreachable_invocation_counter_answers_503_with_a_code_never_500(project, upstreams, call, monkeypatch):
    from redis.exceptions import ConnectionError as RedisConnectionError

    from gateway import quota

    async def unreachable(project_id, agent_name=""):
        raise RedisConnectionError("No connection available.")

    monkeypatch.setattr(quota, "check_and_count", unreachable)
    up = upstreams("a")
    register(project, "counted", up.url)
    response = call.get("/api/v1/agents/counted/invoke/echo")
    assert response.status_code == 503
    assert response.json()["code"] == "counter_unavailable"
    assert response.headers["retry-after"] == "1"
    assert up.hits == 0
    assert wait_for(lambda: in_flight(project.pk) == 0)  # its concurrency lease was given back
