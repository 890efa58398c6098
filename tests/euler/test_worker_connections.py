"""A Celery worker's processes keep their database connection between tasks (euler/celery.py)."""

from __future__ import annotations

import types

import pytest
from celery.signals import worker_init

from euler import celery as euler_celery
from quotas.models import Project


def db(engine="django.db.backends.postgresql", **options):
    return {"default": {"ENGINE": engine, "CONN_MAX_AGE": 0, "CONN_HEALTH_CHECKS": False, "OPTIONS": options}}


def test_a_worker_keeps_its_postgresql_connection_checked_before_reuse():
    databases = db()
    euler_celery.persistent_connections(databases, 300)
    assert (databases["default"]["CONN_MAX_AGE"], databases["default"]["CONN_HEALTH_CHECKS"]) == (300, True)


def test_sqlite_keeps_its_connection_too():
    databases = db("django.db.backends.sqlite3")
    euler_celery.persistent_connections(databases, 300)
    assert (databases["default"]["CONN_MAX_AGE"], databases["default"]["CONN_HEALTH_CHECKS"]) == (300, True)


def test_not_with_the_pool_or_a_max_age_of_zero():
    for databases, max_age in [
        (db(pool={"min_size": 1}), 300),
        (db(), 0),
    ]:
        euler_celery.persistent_connections(databases, max_age)
        assert databases["default"]["CONN_MAX_AGE"] == 0 and not databases["default"]["CONN_HEALTH_CHECKS"]


def test_it_is_set_when_a_worker_starts_and_only_then(settings):
    before = dict(settings.DATABASES["default"])
    assert euler_celery._worker_connections in [r() for _, r in worker_init.receivers]
    try:
        settings.EULER_WORKER_DB_CONN_MAX_AGE = 120
        euler_celery._worker_connections()
        assert settings.DATABASES["default"]["CONN_MAX_AGE"] == 120
    finally:
        settings.DATABASES["default"].update(before)


class Task:
    """What Celery's task signals hand their receivers: the task, with its request."""

    def __init__(self, *, eager: bool = False) -> None:
        self.request = types.SimpleNamespace(is_eager=eager)


def run_tasks(fixup, n: int, task: Task) -> None:
    """n tasks as a prefork worker's pool process runs them: the fix-up's and our receivers around each."""
    for _ in range(n):
        fixup.on_task_prerun(task)
        euler_celery._close_old_connections(task)
        list(Project.objects.all()[:1])
        fixup.on_task_postrun(task)
        euler_celery._close_old_connections(task)


@pytest.fixture
def worker_db(settings):
    """This process's connection as a worker's would be: CONN_MAX_AGE from worker_init, connected afresh."""
    from django.db import connection

    before = dict(settings.DATABASES["default"])
    connection.close()
    euler_celery.persistent_connections(settings.DATABASES, settings.EULER_WORKER_DB_CONN_MAX_AGE)
    yield connection
    connection.close()
    settings.DATABASES["default"].clear()
    settings.DATABASES["default"].update(before)


@pytest.mark.django_db(transaction=True)
def test_celerys_django_fixup_leaves_a_workers_connection_open_across_tasks(worker_db):
    # Celery 5.x's fix-up closes every connection around each task unless CELERY_DB_REUSE_MAX is set: without it
    # CONN_MAX_AGE alone changed nothing (each periodic task connected anew).
    from celery.fixups.django import DjangoWorkerFixup

    fixup = DjangoWorkerFixup(euler_celery.app)
    assert fixup.db_reuse_max == 1000
    worker_db.ensure_connection()
    first = worker_db.connection
    run_tasks(fixup, 20, Task())
    assert worker_db.connection is first


@pytest.mark.django_db(transaction=True)
def test_a_connection_past_its_age_is_closed_and_a_broken_one_replaced_before_the_next_task_uses_it(worker_db):
    from celery.fixups.django import DjangoWorkerFixup

    if worker_db.vendor == "sqlite":
        pytest.skip("Django's SQLite backend always calls a connection usable: there is no health check to test")
    fixup = DjangoWorkerFixup(euler_celery.app)
    worker_db.ensure_connection()
    first = worker_db.connection
    worker_db.close_at = 0  # past its CONN_MAX_AGE
    run_tasks(fixup, 1, Task())
    assert first.closed
    second = worker_db.connection
    second.close()  # gone under Django's feet (a PostgreSQL restart, an idle timeout)
    run_tasks(fixup, 1, Task())  # the health check before its first query replaces it: no error
    assert worker_db.connection is not second and not worker_db.connection.closed


def test_an_eager_task_leaves_its_callers_connection_alone(monkeypatch):
    from django.db import connection

    closed = []
    monkeypatch.setattr(connection, "close_if_unusable_or_obsolete", lambda: closed.append(True))
    euler_celery._close_old_connections(Task(eager=True))
    assert closed == []
