"""The DB shell of the scheduler: the Redis pass lock, pending reasons, counters, wake-ups."""

from __future__ import annotations

import pytest

from euler.redis import client
from jobs import wakeups
from jobs.models import Job
from jobs.scheduling import cycle

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _clean_lock():
    client().delete(cycle.redis_key("lock"), cycle.redis_key("dirty"), cycle.redis_key("requested"))
    yield
    client().delete(cycle.redis_key("lock"), cycle.redis_key("dirty"), cycle.redis_key("requested"))


def test_a_pass_asked_for_while_another_runs_is_left_to_the_holder(submit, make_node):
    make_node()
    job = submit()
    held = client().lock(cycle.redis_key("lock"), timeout=30)
    assert held.acquire(blocking=False)
    stats = cycle.run()
    assert stats.busy and stats.placed == 0
    assert client().exists(cycle.redis_key("dirty"))  # the holder will go again
    held.release()
    assert cycle.run().placed == 1
    assert Job.objects.get(pk=job["id"]).state == "assigned"


def test_queued_jobs_carry_a_pending_reason_that_clears_once_placed(submit, make_node, schedule):
    job = submit(gpu_count=2, region="cn-bj")
    make_node(region="cn-sh")
    make_node(region="cn-bj", gpus=1)
    schedule()
    reason = Job.objects.get(pk=job["id"]).pending_reason
    assert reason == "no node fits: 1 are in another region, 1 lack 2 free GPUs"
    make_node(region="cn-bj", gpus=2)
    schedule()
    job = Job.objects.get(pk=job["id"])
    assert job.state == "assigned" and job.pending_reason == ""
    assert len(job.current_attempt.gpu_uuids) == 2


def test_the_concurrency_quota_holds_jobs_in_the_queue(project, submit, make_node, schedule):
    from quotas.models import Quota

    Quota.objects.filter(project=project).update(max_concurrent_jobs=1)
    make_node()
    first, second = submit(), submit()
    schedule()
    assert Job.objects.get(pk=first["id"]).state == "assigned"
    second = Job.objects.get(pk=second["id"])
    assert second.state == "queued" and second.pending_reason.startswith("concurrency_quota")


def test_node_counters_follow_active_attempts(submit, make_node, schedule, api):
    node = make_node()
    job = submit(cpu_milli=1500)
    schedule()
    node.refresh_from_db()
    assert node.allocated_cpu_milli == 1500
    from jobs import attempts

    attempts.node_lost(node_id=node.pk)
    schedule()
    node.refresh_from_db()
    assert node.allocated_cpu_milli == 0  # freed; the retry waits out its backoff
    assert Job.objects.get(pk=job["id"]).state == "queued"


def test_a_placement_wakes_the_node_after_commit(submit, make_node, schedule, django_capture_on_commit_callbacks):
    node = make_node()
    submit()
    pubsub = client().pubsub()
    pubsub.subscribe(f"euler:node-wake:{node.pk}")
    pubsub.get_message(timeout=1)
    with django_capture_on_commit_callbacks(execute=True):
        schedule()
    msg = pubsub.get_message(timeout=2)
    pubsub.close()
    assert msg is not None and msg["type"] == "message"


def test_a_burst_of_requests_enqueues_one_task_until_it_starts(monkeypatch):
    from jobs import tasks

    sent = []
    monkeypatch.setattr(tasks.schedule, "delay", lambda: sent.append(1))
    for _ in range(5):
        wakeups.request_pass()
    assert sent == [1]
    assert client().exists(cycle.redis_key("dirty"))
    cycle.run()  # the task starts: later requests enqueue again
    wakeups.request_pass()
    assert sent == [1, 1]


def test_a_submit_places_the_job_once_its_transaction_commits(submit, make_node, django_capture_on_commit_callbacks):
    make_node()
    with django_capture_on_commit_callbacks(execute=True):
        job = submit()
    assert Job.objects.get(pk=job["id"]).state == "assigned"


def test_disk_is_held_by_placements_and_named_in_the_pending_reason(submit, make_node, schedule):
    from nodes.models import Node

    node = make_node(disk_bytes=25 * 1024**3)
    first, second, third = (submit(disk_bytes=10 * 1024**3) for _ in range(3))
    schedule()
    assert Job.objects.get(pk=first["id"]).current_attempt.disk_bytes == 10 * 1024**3
    assert Job.objects.get(pk=second["id"]).state == "assigned"
    assert Job.objects.get(pk=third["id"]).pending_reason == f"no node fits: 1 lack {10 * 1024**3} free disk bytes"
    assert Node.objects.get(pk=node.pk).allocated_disk_bytes == 20 * 1024**3


def test_a_node_whose_egress_rules_are_not_installed_gets_no_networked_job(submit, make_node, schedule):
    make_node(job_egress="public", job_egress_error="egress setup failed: iptables: Permission denied")
    networked, offline = submit(), submit(network="none")
    schedule()
    networked = Job.objects.get(pk=networked["id"])
    assert networked.state == "queued"
    assert networked.pending_reason == (
        'no node fits: 1 refuse networked jobs (egress rules not installed; network "none" jobs fit)'
    )
    assert Job.objects.get(pk=offline["id"]).state == "assigned"
    make_node(job_egress="public")
    schedule()
    assert Job.objects.get(pk=networked.pk).state == "assigned"


def test_a_pass_with_a_limit_leaves_a_longer_queue_to_the_workers_pass(submit, make_node, monkeypatch):
    from jobs import tasks

    monkeypatch.setattr(tasks.schedule, "delay", lambda: None)  # submits ask for the worker's pass, which waits
    make_node()
    jobs = [submit() for _ in range(3)]
    stats = cycle.run(limit=2)
    assert stats.deferred and stats.placed == 0
    assert client().exists(cycle.redis_key("dirty"))  # still asked for
    assert cycle.run(limit=3).placed == 3
    assert {Job.objects.get(pk=j["id"]).state for j in jobs} == {"assigned"}


@pytest.mark.django_db(transaction=True)
def test_a_submit_to_a_web_process_is_placed_by_that_process_before_it_answers(
    submit, make_node, monkeypatch, settings
):
    from asgiref.sync import async_to_sync, sync_to_async

    from jobs import tasks

    sent = []
    monkeypatch.setattr(tasks.schedule, "delay", lambda: sent.append(1))  # the worker's pass, asked for
    settings.EULER_SCHEDULE_ON_SUBMIT_MAX = 2
    make_node()

    def submitted():
        from django.db import connections

        try:
            return submit()
        finally:
            connections.close_all()  # the thread's own: the test database can be dropped

    def in_a_web_process():  # a sync view's thread, called from the serving loop as the web's are
        return async_to_sync(sync_to_async(submitted, thread_sensitive=False))()

    assert submit()["state"] == "queued" and sent == [1]  # not a web process: the worker's pass alone
    client().delete(cycle.redis_key("requested"))  # the worker's task started
    assert in_a_web_process()["state"] == "assigned" and sent == [1]  # placed here (the first one too), no task
    assert Job.objects.filter(state="queued").count() == 0
    monkeypatch.setattr(cycle, "queued_order", lambda: [1, 2, 3])  # a longer queue than the limit
    assert in_a_web_process()["state"] == "queued" and sent == [1, 1]  # left to the worker's pass
    assert client().exists(cycle.redis_key("dirty"))
