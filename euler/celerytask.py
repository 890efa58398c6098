"""The base class of every Euler task: periodic tasks are single-flight.

A periodic task whose run outlasts its interval would otherwise pile up behind itself: beat keeps sending, and
each message waits for a process, then does the same work again. Here a run first takes a Redis lock named
after the task (and the database, so test runs and deployments sharing a Redis do not block each other). A run
that finds it held is skipped: logged and counted in `euler_tasks_skipped_total{task=…}`. The lock expires a
little after the task's hard time limit, so a pool process killed at that limit frees it soon after. Without
Redis the task runs unlocked (the time limits still bound it).
"""

from __future__ import annotations

import logging

from celery import Task

log = logging.getLogger(__name__)

LOCK_MARGIN = 5.0  # seconds the lock outlives the hard time limit


def lock_key(name: str) -> str:
    from django.db import connection

    return f"euler:task:single-flight:{connection.settings_dict.get('NAME')}:{name}"


def note_skipped(name: str, why: str) -> None:
    from euler import metrics

    log.info("task %s skipped: %s", name, why)
    metrics.inc("euler_tasks_skipped_total", task=name)


class EulerTask(Task):
    def __call__(self, *args, **kwargs):
        from django.conf import settings

        if self.name not in settings.EULER_SINGLE_FLIGHT_TASKS:
            return super().__call__(*args, **kwargs)
        import redis

        from euler.redis import client

        expiry = float(self.time_limit or settings.CELERY_TASK_TIME_LIMIT) + LOCK_MARGIN
        try:
            lock = client().lock(lock_key(self.name), timeout=expiry, blocking=False)
            acquired = lock.acquire(blocking=False)
        except redis.exceptions.RedisError as exc:
            log.warning("task %s runs without its single-flight lock: %s", self.name, type(exc).__name__)
            return super().__call__(*args, **kwargs)
        if not acquired:
            note_skipped(self.name, "the previous run still holds its lock")
            return None
        try:
            return super().__call__(*args, **kwargs)
        finally:
            try:
                lock.release()
            except redis.exceptions.LockError:
                log.warning("task %s outlived its single-flight lock", self.name)
            except redis.exceptions.RedisError as exc:
                log.warning("task %s could not release its single-flight lock: %s", self.name, type(exc).__name__)
