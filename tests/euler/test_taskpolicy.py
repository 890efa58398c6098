"""Bounded background work: every task on its intended queue with a soft and a hard time limit, periodic tasks
single-flight, and the processes that start workers start one for the control loop alone."""

from __future__ import annotations

import threading

import pytest
from celery import current_app

from euler import celerytask, metrics, taskpolicy
from euler.taskpolicy import CONTROL, DISPATCH, HEALTH, MAINTENANCE, QUEUES, WEBHOOKS

CONTROL_LOOP = {
    "jobs.tasks.schedule",
    "jobs.tasks.sweep",
    "jobs.tasks.node_lost",
    "nodes.tasks.mark_offline",
    "nodes.tasks.flush_seen",
    # the cron clock: bounded database work (submits), never a tenant's server, so no dead webhook delays a tick
    "workflows.tasks.schedule_tick",
    # the services controller: database work (replicas are jobs it submits and cancels) and one Redis read per
    # service; the readiness probes that reach tenants' servers are the health checker's, on `health`
    "services.tasks.reconcile_services",
    # a lender's window's end: stops running attempts before the close (database work only, lending/windows.py)
    "lending.tasks.stop_at_window_end",
}


@pytest.fixture(scope="module")
def app():
    current_app.loader.import_default_modules()
    current_app.finalize()
    return current_app


def project_tasks(app) -> dict:
    return {name: task for name, task in app.tasks.items() if not name.startswith("celery.")}


def queue_of(app, name: str) -> str:
    return app.amqp.router.route({}, name)["queue"].name


def test_every_registered_task_is_in_the_policy_table(app, settings):
    table = taskpolicy.policies(health_deadline=settings.EULER_AGENT_HEALTH_DEADLINE)
    assert set(project_tasks(app)) == set(table)


def test_the_control_loop_alone_is_on_the_control_queue(app):
    on_control = {name for name in project_tasks(app) if queue_of(app, name) == CONTROL}
    assert on_control == CONTROL_LOOP


def test_health_checks_and_maintenance_are_on_their_own_queues(app):
    assert queue_of(app, "agents.tasks.run_health_checks") == HEALTH
    for name in ("quotas.flush_invocations", "euler.tasks.purge_expired", "jobs.tasks.compact_logs",
                 "gateway.tasks.prune_invocations", "jobs.tasks.enforce_budgets"):  # fmt: skip
        assert queue_of(app, name) == MAINTENANCE, name
    assert queue_of(app, "workflows.tasks.webhook_deliver") == WEBHOOKS


def test_the_webhook_dispatch_has_a_queue_apart_from_the_deliveries(app):
    # A backlog of slow deliveries on `webhooks` never holds the pass that makes and hands out deliveries.
    on_dispatch = {name for name in project_tasks(app) if queue_of(app, name) == DISPATCH}
    assert on_dispatch == {"workflows.tasks.webhook_dispatch", "workflows.tasks.webhook_pump"}


def test_a_task_missing_from_the_table_never_lands_on_the_control_queue(app):
    assert queue_of(app, "some.new.task") == MAINTENANCE


def test_every_task_declares_a_soft_and_a_hard_time_limit(app):
    for name, task in app.tasks.items():
        assert task.soft_time_limit and task.time_limit, name
        assert 0 < task.soft_time_limit < task.time_limit, name


def test_a_health_round_may_last_its_deadline_and_more(app, settings):
    task = app.tasks["agents.tasks.run_health_checks"]
    assert task.soft_time_limit > settings.EULER_AGENT_HEALTH_DEADLINE


def test_the_scheduling_pass_is_soft_stopped_before_its_own_lock_expires(app):
    assert app.tasks["jobs.tasks.schedule"].time_limit < 120  # jobs/scheduling/cycle.py's lock timeout


def test_every_periodic_task_is_single_flight_and_its_beat_messages_expire(app, settings):
    for key, entry in settings.CELERY_BEAT_SCHEDULE.items():
        name = entry["task"]
        assert name in settings.EULER_SINGLE_FLIGHT_TASKS or name == "jobs.tasks.schedule", key  # own lock
        assert entry["options"]["expires"] >= 1.0, key
    assert settings.CELERY_WORKER_PREFETCH_MULTIPLIER == 1
    assert settings.CELERY_WORKER_MAX_MEMORY_PER_CHILD == settings.EULER_WORKER_MAX_MEMORY_MB * 1024


def test_make_up_and_the_harness_start_a_worker_for_the_control_queue_alone_and_one_for_the_dispatch():
    from config.up import worker_commands

    commands = dict(worker_commands("python"))
    queues = {name: argv[argv.index("-Q") + 1].split(",") for name, argv in commands.items()}
    assert queues == {
        "worker-control": [CONTROL],
        "worker": [HEALTH, MAINTENANCE, WEBHOOKS],
        "worker-dispatch": [DISPATCH],
    }
    assert sorted(q for qs in queues.values() for q in qs) == sorted(QUEUES)  # every queue has a consumer
    assert len({argv[argv.index("-n") + 1] for argv in commands.values()}) == 3
    assert all(argv[argv.index("-O") + 1] == "fair" for argv in commands.values())  # idle processes only


def test_compose_runs_a_worker_for_the_control_queue_alone_and_one_for_the_dispatch():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docker-compose.yml").read_text()
    assert '"-Q", "control"' in text and '"-Q", "health,maintenance,webhooks"' in text
    assert '"-Q", "dispatch"' in text
    assert text.count('"worker", "-l", "info", "-O", "fair"') == 3


# --- single flight ------------------------------------------------------------------------------------------
def skipped(name: str) -> float:
    from euler.redis import client

    metrics.flush()
    value = client().hget("euler:metrics:counters", f'euler_tasks_skipped_total{{task="{name}"}}')
    return float(value or 0)


@pytest.mark.django_db
def test_a_second_run_of_a_periodic_task_while_the_first_runs_is_skipped_and_counted(monkeypatch):
    from nodes import liveness, tasks

    inside, release, calls = threading.Event(), threading.Event(), []

    def slow_flush() -> int:
        calls.append(threading.current_thread().name)
        inside.set()
        assert release.wait(20)
        return 7

    monkeypatch.setattr(liveness, "flush_seen", slow_flush)
    before = skipped("nodes.tasks.flush_seen")
    results = []
    first = threading.Thread(target=lambda: results.append(tasks.flush_seen()), name="first")
    first.start()
    try:
        assert inside.wait(20)
        assert tasks.flush_seen() is None  # skipped: the first run holds the lock
        from euler.redis import client

        ttl = client().pttl(celerytask.lock_key("nodes.tasks.flush_seen"))
        assert 0 < ttl <= (tasks.flush_seen.time_limit + celerytask.LOCK_MARGIN) * 1000
    finally:
        release.set()
        first.join(20)
    assert results == [7] and calls == ["first"]
    assert skipped("nodes.tasks.flush_seen") == before + 1

    assert tasks.flush_seen() == 7  # the lock went with the first run
    assert calls == ["first", "MainThread"]


@pytest.mark.django_db
def test_a_run_that_fails_releases_its_lock(monkeypatch):
    from nodes import liveness, tasks

    def broken() -> int:
        raise RuntimeError("boom")

    monkeypatch.setattr(liveness, "flush_seen", broken)
    with pytest.raises(RuntimeError):
        tasks.flush_seen()
    monkeypatch.setattr(liveness, "flush_seen", lambda: 3)
    assert tasks.flush_seen() == 3


@pytest.mark.django_db
def test_a_task_that_is_not_periodic_is_never_skipped(monkeypatch):
    from jobs import attempts, tasks

    calls = []
    monkeypatch.setattr(attempts, "node_lost", lambda *, node_id: calls.append(node_id))
    from euler.redis import client

    client().set(celerytask.lock_key("jobs.tasks.node_lost"), "someone", ex=30)
    try:
        tasks.node_lost(5)
    finally:
        client().delete(celerytask.lock_key("jobs.tasks.node_lost"))
    assert calls == [5]
