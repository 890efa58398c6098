import pytest

from agents.health import Counters, rolling, run_checks, step
from agents.models import AgentInstance, Health
from agents.services import agent_create
from tests.gateway.servers import ServerThread, Upstream

pytestmark = pytest.mark.django_db


def test_two_failures_in_a_row_make_an_instance_unhealthy():
    state = Counters(Health.HEALTHY, 5, 0)
    state = step(state, ok=False)
    assert state.health == Health.HEALTHY
    state = step(state, ok=False)
    assert state.health == Health.UNHEALTHY


def test_two_successes_in_a_row_make_it_healthy_again():
    state = Counters(Health.UNHEALTHY, 0, 4)
    state = step(state, ok=True)
    assert state.health == Health.UNHEALTHY
    state = step(step(state, ok=False), ok=True)
    assert state.health == Health.UNHEALTHY
    assert step(state, ok=True).health == Health.HEALTHY


def test_a_new_instance_is_healthy_after_its_first_good_check():
    assert step(Counters(Health.UNKNOWN, 0, 0), ok=True).health == Health.HEALTHY


def test_the_rolling_latency_moves_toward_new_samples():
    assert rolling(None, 10.0) == 10.0
    assert 10.0 < rolling(10.0, 20.0) < 20.0


@pytest.fixture
def upstream(settings):
    settings.EULER_AGENT_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    app = Upstream("probe")
    app.server = ServerThread(app).start()
    yield app
    if app.server.thread.is_alive():
        app.server.stop()


def test_a_killed_instance_is_unhealthy_within_two_checks(project, upstream):
    agent = agent_create(project=project, fields={"name": "h"}, instances=[{"base_url": upstream.server.url}])
    instance = agent.instances.get()
    assert run_checks([instance.pk]) == 1
    instance.refresh_from_db()
    assert instance.health == Health.HEALTHY and instance.latency_ms is not None and instance.last_check_at

    upstream.server.stop()
    run_checks([instance.pk])
    run_checks([instance.pk])
    instance.refresh_from_db()
    assert instance.health == Health.UNHEALTHY
    assert instance.consecutive_failures == 2
    assert "ConnectError" in instance.last_error


def test_a_5xx_health_answer_counts_as_a_failure_and_recovery_takes_two_successes(project, upstream):
    agent = agent_create(project=project, fields={"name": "h"}, instances=[{"base_url": upstream.server.url}])
    upstream.health_status = 503
    run_checks()
    AgentInstance.objects.update(last_check_at=None)
    run_checks()
    instance = agent.instances.get()
    assert instance.health == Health.UNHEALTHY and instance.last_error == "HTTP 503"
    upstream.health_status = 200
    run_checks([instance.pk])
    assert AgentInstance.objects.get().health == Health.UNHEALTHY
    run_checks([instance.pk])
    assert AgentInstance.objects.get().health == Health.HEALTHY


def test_checks_run_only_when_due(project, upstream):
    agent_create(project=project, fields={"name": "h"}, instances=[{"base_url": upstream.server.url}])
    assert run_checks() == 1
    assert run_checks() == 0


def test_the_beat_schedule_holds_the_health_check_task(settings):
    from agents import tasks

    assert settings.CELERY_BEAT_SCHEDULE["agents-health-checks"]["task"] == "agents.tasks.run_health_checks"
    assert tasks.run_health_checks.name == "agents.tasks.run_health_checks"
