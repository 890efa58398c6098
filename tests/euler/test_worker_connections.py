"""A Celery worker's processes keep their PostgreSQL connection between tasks (euler/celery.py)."""

from __future__ import annotations

from celery.signals import worker_init

from euler import celery as euler_celery


def db(engine="django.db.backends.postgresql", **options):
    return {"default": {"ENGINE": engine, "CONN_MAX_AGE": 0, "CONN_HEALTH_CHECKS": False, "OPTIONS": options}}


def test_a_worker_keeps_its_postgresql_connection_checked_before_reuse():
    databases = db()
    euler_celery.persistent_connections(databases, 300)
    assert (databases["default"]["CONN_MAX_AGE"], databases["default"]["CONN_HEALTH_CHECKS"]) == (300, True)


def test_not_with_the_pool_sqlite_or_a_max_age_of_zero():
    for databases, max_age in [
        (db(pool={"min_size": 1}), 300),
        (db("django.db.backends.sqlite3"), 300),
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
