from django.apps import AppConfig


class EulerConfig(AppConfig):
    name = "euler"
    verbose_name = "Euler"

    def ready(self) -> None:
        from django.urls import register_converter

        from euler.converters import IdConverter

        register_converter(IdConverter, "id")  # before any URLconf (HTTP or websocket) is loaded

        from django.db.models.signals import post_migrate

        post_migrate.connect(_sqlite_wal, dispatch_uid="euler-sqlite-wal")  # sent for each app with models


def _sqlite_wal(using: str = "default", **_kwargs) -> None:
    """`make up`'s SQLite file in write-ahead-log mode, once, when it is migrated (before the platform's processes
    connect: the switch needs the file to itself). A commit then appends to the log and syncs it, instead of
    writing and syncing a rollback journal and the file itself: ~0.26 ms instead of ~0.72 here, on every write of
    the start path (`bench/sqlite_commit.py`), equally durable (synchronous=FULL, config/settings.py); and
    readers no longer wait for a writer's commit. The mode stays with the file."""
    import logging

    from django.db import OperationalError, connections

    connection = connections[using]
    if connection.vendor != "sqlite" or connection.is_in_memory_db():
        return
    try:
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA journal_mode=WAL")
    except OperationalError as exc:  # another process had it open: the rollback journal stays, as correct
        logging.getLogger(__name__).warning("SQLite stays in rollback-journal mode: %s", exc)
