"""A route this process cached does not outlive its agent: removed and added again under its name, the agent's next
call goes to its new instances, however fresh the cached route (found by `make test-flaky`: the CLI test that adds,
calls and removes `echo`, repeated, reached the first run's closed upstream)."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync

from agents.models import Agent, AgentInstance
from gateway import routes

pytestmark = pytest.mark.django_db(transaction=True)


def _agent(project, url: str) -> Agent:
    agent = Agent.objects.create(project=project, name="echo")
    AgentInstance.objects.create(agent=agent, base_url=url, health="healthy")
    return agent


def _urls(project) -> list[str]:
    route = async_to_sync(routes.route_for)(project.pk, "echo")
    return [u.base_url for u in route.upstreams] if route else []


def test_an_agent_removed_and_added_again_is_routed_to_its_new_instances(project, settings):
    settings.EULER_GATEWAY_ROUTE_TTL = 3600  # a cached route would be used for an hour
    first = _agent(project, "http://127.0.0.1:1111")
    assert _urls(project) == ["http://127.0.0.1:1111"]
    first.delete()
    assert _urls(project) == []  # removed: no route, rather than the cached one
    _agent(project, "http://127.0.0.1:2222")
    assert _urls(project) == ["http://127.0.0.1:2222"]


def test_an_instance_added_is_routed_at_once(project, settings):
    settings.EULER_GATEWAY_ROUTE_TTL = 3600
    agent = _agent(project, "http://127.0.0.1:1111")
    assert _urls(project) == ["http://127.0.0.1:1111"]
    AgentInstance.objects.create(agent=agent, base_url="http://127.0.0.1:3333", health="healthy")
    assert _urls(project) == ["http://127.0.0.1:1111", "http://127.0.0.1:3333"]
