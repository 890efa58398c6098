"""The handover window: a pass hands over at most EULER_SCHEDULER_HANDOVER_WINDOW attempts per live web process
that nodes have not started yet; the rest wait, saying why, and a start asks for the next pass."""

from __future__ import annotations

import pytest

from euler.redis import client
from jobs import wakeups
from jobs.models import Attempt, Job
from jobs.scheduling import cycle, policy
from nodeagent import protocol

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _clean_flags():
    keys = [wakeups.redis_key(k) for k in ("lock", "dirty", "requested", "paced")]
    client().delete(*keys)
    yield
    client().delete(*keys)


def test_the_allowance_is_the_window_per_web_process_less_what_is_outstanding():
    assert policy.handover_allowance(window=100, web_processes=1, outstanding=30) == 70
    assert policy.handover_allowance(window=100, web_processes=3, outstanding=30) == 270
    assert policy.handover_allowance(window=100, web_processes=0, outstanding=30) == 70  # none registered yet
    assert policy.handover_allowance(window=100, web_processes=1, outstanding=130) == 0
    assert policy.handover_allowance(window=0, web_processes=1, outstanding=10**6) is None  # no window


def _report_running(attempt: Attempt, credential: str):
    from rest_framework.test import APIClient

    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Bearer {credential}")
    path = "/node-api/v1/" + protocol.PATH_ATTEMPT_REPORT.format(attempt_id=attempt.pk)
    return c.post(path, {"state": "running", "container_id": "c1"}, format="json")


def test_a_full_window_holds_jobs_back_saying_why_and_a_start_frees_a_place(
    settings, submit, make_node, schedule, credential_for, django_capture_on_commit_callbacks
):
    settings.EULER_SCHEDULER_HANDOVER_WINDOW = 3
    node = make_node(cpu_milli=64_000, memory_bytes=64 * 2**30)
    jobs = [submit()["id"] for _ in range(5)]

    stats = schedule()
    assert stats.placed == 3 and stats.paced
    assert [Job.objects.get(pk=j).state for j in jobs] == ["assigned"] * 3 + ["queued"] * 2  # FIFO: the first three
    assert {Job.objects.get(pk=j).pending_reason for j in jobs[3:]} == {policy.REASON_PACED}
    assert client().exists(wakeups.redis_key("paced"))

    assert schedule().placed == 0  # nothing started: still full

    first = Attempt.objects.get(job_id=jobs[0])
    client().delete(wakeups.redis_key("requested"), wakeups.redis_key("dirty"))
    with django_capture_on_commit_callbacks(execute=True):
        assert _report_running(first, credential_for(node)).status_code == 200
    # The start asked for a pass (Celery runs it at once in tests): it took the one free place.
    assert [Job.objects.get(pk=j).state for j in jobs] == ["running"] + ["assigned"] * 3 + ["queued"]
    assert schedule().placed == 0

    settings.EULER_SCHEDULER_HANDOVER_WINDOW = 10
    stats = schedule()
    assert stats.placed == 1 and not stats.paced
    assert not client().exists(wakeups.redis_key("paced"))
    assert all(Job.objects.get(pk=j).state in ("assigned", "running") for j in jobs)


def test_the_window_grows_with_the_live_web_processes(settings, submit, make_node, schedule):
    import time

    from nodes import livestore

    settings.EULER_SCHEDULER_HANDOVER_WINDOW = 2
    make_node(cpu_milli=64_000, memory_bytes=64 * 2**30)
    for _ in range(6):
        submit()
    now = time.time()
    before = livestore.web_processes(now)  # this test process may have registered itself in an earlier test
    pipe = client().pipeline(transaction=False)
    for proc in ("web-a", "web-b", "web-c"):
        pipe.zadd(f"{livestore.ns()}webs", {f"{proc}|250": now + 60})
    pipe.execute()
    try:
        assert cycle.handover_allowance() == 2 * (before + 3)
        assert schedule().placed == 6
    finally:
        client().zrem(f"{livestore.ns()}webs", *(f"{p}|250" for p in ("web-a", "web-b", "web-c")))


def test_without_a_window_a_pass_places_everything(settings, submit, make_node, schedule):
    settings.EULER_SCHEDULER_HANDOVER_WINDOW = 0
    make_node(cpu_milli=64_000, memory_bytes=64 * 2**30)
    for _ in range(5):
        submit()
    stats = schedule()
    assert stats.placed == 5 and not stats.paced
