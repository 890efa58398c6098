"""A health check is bounded whatever the upstream does: one deadline for the whole exchange, at most 64 KiB read,
every due check of a round at once, and the SSRF guard's pinning kept. Real servers on loopback."""

import time

import pytest

from agents.health import MAX_BODY, run_checks
from agents.models import AgentInstance, Health
from agents.services import agent_create
from tests.agents.badupstreams import BadUpstreams
from tests.gateway.servers import ServerThread, Upstream

pytestmark = pytest.mark.django_db

DEADLINE = 0.5


@pytest.fixture
def loopback_allowed(settings):
    settings.EULER_AGENT_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    settings.EULER_AGENT_HEALTH_DEADLINE = DEADLINE
    return settings


@pytest.fixture
def bad(loopback_allowed):
    started = []

    def start(modes: list[str], interval: float = 1.0) -> BadUpstreams:
        upstreams = BadUpstreams(modes, interval=interval).start()
        started.append(upstreams)
        return upstreams

    yield start
    for upstreams in started:
        upstreams.stop()


def register(project, urls: list[str], name: str = "bad", **fields):
    return agent_create(project=project, fields={"name": name, **fields}, instances=[{"base_url": u} for u in urls])


@pytest.mark.parametrize("mode", ["loris", "loris-body"])
def test_a_slow_loris_upstream_fails_its_check_at_the_deadline_for_the_whole_exchange(project, bad, mode):
    # One byte every 0.1 s: no single read ever waits as long as the deadline, only the whole exchange does.
    upstreams = bad([mode], interval=0.1)
    register(project, upstreams.urls, health_timeout_s=30.0)

    assert run_checks() == 1

    instance = AgentInstance.objects.get()
    assert instance.consecutive_failures == 1
    assert instance.last_error == f"no complete answer within {DEADLINE:g} s"
    assert upstreams.connections == 1


def test_the_agents_own_shorter_timeout_wins_over_the_deadline(project, bad, settings):
    settings.EULER_AGENT_HEALTH_DEADLINE = 30.0
    upstreams = bad(["loris"], interval=0.1)
    register(project, upstreams.urls, health_timeout_s=0.3)

    run_checks()

    assert AgentInstance.objects.get().last_error == "no complete answer within 0.3 s"


def test_an_endless_body_is_read_up_to_64_kib_and_fails_the_check(project, bad):
    upstreams = bad(["flood"])
    register(project, upstreams.urls)

    run_checks()

    instance = AgentInstance.objects.get()
    assert MAX_BODY == 64 * 1024
    assert instance.last_error == "the answer is larger than 64 KiB"
    assert instance.consecutive_failures == 1
    # The check hung up: the server's next writes fail instead of filling the worker's memory.
    wait_until(lambda: upstreams.client_gone == 1, "the flood server sees the client gone")


def wait_until(check, what: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for: {what}"
        time.sleep(0.05)


def test_n_slow_upstreams_are_checked_at_once_and_all_marked_unhealthy_in_two_rounds(project, bad):
    n = 20
    upstreams = bad(["loris"] * 10 + ["flood"] * 10, interval=0.2)
    register(project, upstreams.urls)

    assert run_checks() == n
    # Every probe was open at the same moment: one round costs one deadline, not n.
    assert upstreams.peak_open == n
    assert AgentInstance.objects.filter(consecutive_failures=1).count() == n

    AgentInstance.objects.update(last_check_at=None)
    assert run_checks() == n
    assert AgentInstance.objects.filter(health=Health.UNHEALTHY).count() == n


def test_a_healthy_upstream_beside_slow_ones_stays_healthy(project, bad):
    upstreams = bad(["loris"] * 5)
    good = Upstream("good")
    good.server = ServerThread(good).start()
    try:
        register(project, upstreams.urls)
        register(project, [good.server.url], name="good")
        run_checks()
        AgentInstance.objects.update(last_check_at=None)
        run_checks()
    finally:
        good.server.stop()
    assert AgentInstance.objects.get(agent__name="good").health == Health.HEALTHY
    assert set(AgentInstance.objects.filter(agent__name="bad").values_list("health", flat=True)) == {Health.UNHEALTHY}


def test_a_round_checks_at_most_the_batch_and_the_rest_go_next_least_recently_checked_first(project, bad, settings):
    settings.EULER_AGENT_HEALTH_BATCH = 3
    upstreams = bad(["loris"] * 5)
    register(project, upstreams.urls)

    assert run_checks() == 3
    assert run_checks() == 2
    assert not AgentInstance.objects.filter(last_check_at=None).exists()


def test_the_check_dials_only_addresses_the_ssrf_guard_allows(project, bad, settings):
    upstreams = bad(["flood"])
    register(project, upstreams.urls)  # allowed at registration
    settings.EULER_AGENT_ALLOWED_NETWORKS = []  # loopback no longer allowed: every connect is checked again

    run_checks()

    instance = AgentInstance.objects.get()
    assert "forbidden address" in instance.last_error and "loopback" in instance.last_error
    assert upstreams.connections == 0
