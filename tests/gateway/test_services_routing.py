"""The gateway's part of services (issue 38): calls in flight counted per service agent across gateways, and a call
to a service with no ready replica held until one is ready (or 503 no_ready_replica)."""

import threading
import time

import httpx
import pytest

from agents.models import Agent, AgentInstance
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


def test_calls_in_flight_to_a_service_agent_are_counted_and_released(project, upstreams, gateway, api_key):
    up = upstreams("a")
    agent = Agent.objects.create(project=project, name="svc", service_managed=True)
    AgentInstance.objects.create(agent=agent, base_url=up.url, health="healthy")
    headers = {"X-Euler-API-Key": api_key}
    with httpx.Client(base_url=gateway, headers=headers, timeout=15) as client:
        with client.stream("GET", "/api/v1/agents/svc/invoke/forever") as response:
            chunks = response.iter_raw()
            next(chunks)
            assert limits.agent_in_flight(agent.pk) == 1
        assert wait_for(lambda: limits.agent_in_flight(agent.pk) == 0)
        assert client.get("/api/v1/agents/svc/invoke/echo").status_code == 200
    # The relay gives its lease back as it ends, in a task of its own: a moment after the client has the answer.
    assert wait_for(lambda: limits.agent_in_flight(agent.pk) == 0)


def test_a_plain_agents_calls_are_not_counted_per_agent(project, upstreams, gateway, api_key):
    up = upstreams("a")
    agent = Agent.objects.create(project=project, name="plain")
    AgentInstance.objects.create(agent=agent, base_url=up.url, health="healthy")
    with httpx.Client(base_url=gateway, headers={"X-Euler-API-Key": api_key}, timeout=15) as client:
        with client.stream("GET", "/api/v1/agents/plain/invoke/forever") as response:
            next(response.iter_raw())
            assert limits.agent_in_flight(agent.pk) == 0


def test_a_call_to_a_service_at_zero_is_held_counted_and_served_once_a_replica_is_ready(
    project, upstreams, gateway, api_key, settings
):
    settings.EULER_GATEWAY_COLD_START_WAIT = 30
    up = upstreams("a")
    agent = Agent.objects.create(project=project, name="cold", service_managed=True)
    answers = []

    def call():
        answers.append(httpx.get(f"{gateway}/api/v1/agents/cold/invoke/echo", headers={"X-Euler-API-Key": api_key},
                                 timeout=60))  # fmt: skip

    caller = threading.Thread(target=call)
    caller.start()
    assert wait_for(lambda: limits.agent_in_flight(agent.pk) == 1)  # held, and counted: what wakes the service
    assert not answers
    AgentInstance.objects.create(agent=agent, base_url=up.url, health="healthy")  # a replica got ready
    caller.join(timeout=30)
    assert answers and answers[0].status_code == 200, answers and answers[0].text
    assert wait_for(lambda: limits.agent_in_flight(agent.pk) == 0)


def test_a_held_call_gets_503_no_ready_replica_when_none_gets_ready_in_time(project, gateway, api_key, settings):
    settings.EULER_GATEWAY_COLD_START_WAIT = 0.5
    Agent.objects.create(project=project, name="cold", service_managed=True)
    answer = httpx.get(f"{gateway}/api/v1/agents/cold/invoke/x", headers={"X-Euler-API-Key": api_key}, timeout=30)
    assert answer.status_code == 503 and answer.json()["code"] == "no_ready_replica"
    assert answer.headers["retry-after"] == "5"
