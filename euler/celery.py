"""The Celery application: broker is Redis, periodic tasks come from settings.CELERY_BEAT_SCHEDULE."""

import os

from celery import Celery
from celery.signals import task_postrun, task_prerun, worker_init

from euler import kombu_guard

kombu_guard.install()
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("euler", task_cls="euler.celerytask:EulerTask")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def persistent_connections(databases: dict, max_age: int) -> None:
    """A worker's processes keep their database connection between tasks, checked before each reuse (Django's
    CONN_HEALTH_CHECKS) and closed by Celery's Django fix-up when it is older than `max_age` or broken. Not with the
    psycopg pool (it already keeps them). SQLite's too (`make up`'s file): a new connection read the whole schema
    again at its first statement, 1.15 ms against 0.06 for the pass's first read (`bench/sqlite_commit.py`), on
    every scheduling pass's critical path."""
    db = databases["default"]
    if max_age <= 0 or "pool" in db.get("OPTIONS", {}):
        return
    db["CONN_MAX_AGE"] = max_age
    db["CONN_HEALTH_CHECKS"] = True


@worker_init.connect
def _worker_connections(**_kwargs) -> None:
    # In the worker's main process, before its pool forks: every pool process connects later, with these settings.
    from django.conf import settings

    persistent_connections(settings.DATABASES, settings.EULER_WORKER_DB_CONN_MAX_AGE)


# Celery's Django fix-up closes every connection before and after each task, whatever CONN_MAX_AGE says, unless
# CELERY_DB_REUSE_MAX is set (config/settings.py sets it): then it closes them only every that many tasks, and these
# receivers close what Django would close after a request: a connection past its CONN_MAX_AGE, one whose health
# check fails, one left in an error or outside autocommit. An eager task (tests) runs inside its caller's request.
@task_prerun.connect
@task_postrun.connect
def _close_old_connections(sender=None, **_kwargs) -> None:
    if getattr(getattr(sender, "request", None), "is_eager", False):
        return
    from django.db import close_old_connections

    close_old_connections()
