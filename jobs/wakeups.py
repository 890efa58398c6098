"""Ask for a scheduling pass and wake nodes: the one module the rest of jobs/ calls for both, importing nothing
else of jobs/ (the Celery task is sent by its registered name), so attempts, services, usage and the scheduler
no longer import each other in a circle."""

from __future__ import annotations

import logging

from django.db import connection, transaction

from euler.prepared import Prepared

log = logging.getLogger(__name__)

SCHEDULE_TASK = "jobs.tasks.schedule"


def redis_key(name: str) -> str:
    """Scheduler keys per database: deployments (or test runs) sharing a Redis do not block each other.

    `lock`: one pass at a time; `dirty`: a pass was asked for; `requested`: a task is queued, not started;
    `paced`: the last pass left jobs queued because the handover window was full.
    """
    return f"euler:jobs:scheduler:{connection.settings_dict.get('NAME')}:{name}"


def request_pass(*, here: bool = False) -> None:
    """Ask for a pass: mark the queue dirty, and enqueue a task unless one is queued and not yet started.

    A burst of submits thus costs one Celery task, not one each; a pass already running sees the flag
    and goes again. Never raises: beat runs a pass every few seconds anyway. `here` (a submit): in a web process,
    the pass is run here first (pass_here), and no task is sent when it did the work.
    """
    if here and pass_here():
        return
    try:
        from euler.redis import client

        pipe = client().pipeline(transaction=False)  # one round trip for both flags
        pipe.set(redis_key("dirty"), 1)
        pipe.set(redis_key("requested"), 1, nx=True, ex=30)
        if not pipe.execute()[1]:
            return
    except Exception as exc:  # noqa: BLE001 - without Redis, enqueue anyway
        log.warning("scheduler flags unavailable: %s", type(exc).__name__)
    try:
        from celery import current_app

        current_app.tasks[SCHEDULE_TASK].delay()
    except Exception as exc:  # noqa: BLE001 - the broker being down only delays placement to the next beat
        log.warning("scheduling pass not requested: %s", type(exc).__name__)


def pass_here() -> bool:
    """A web process that has just committed a submit runs the scheduling pass itself, before it answers: the job is
    placed without waiting for a Celery worker to hear of it (the broker's hop and the task's start: submit → placed
    16–19 → 10–13 ms in `bench/cli.py`, with the rest of stop 53). On the request's own thread: a thread of its own
    waited for the interpreter's lock while the request went on. The pass takes the worker's lock; one that is busy
    is left to its holder, which sees the flag and goes again. Over a queue longer than EULER_SCHEDULE_ON_SUBMIT_MAX
    it places nothing: False, and the caller asks for the worker's pass. Nothing outside a web process (a worker, a
    command; the tests' settings turn it off). Never raises."""
    from celery import current_app
    from django.conf import settings

    from euler.synchandler import serving_loop

    limit = settings.EULER_SCHEDULE_ON_SUBMIT_MAX
    if not limit or serving_loop() is None:
        return False
    try:
        stats = current_app.tasks[SCHEDULE_TASK].run(limit=limit)  # the task's own body, by name (no import circle)
    except Exception as exc:  # noqa: BLE001 - the worker's pass places the job all the same
        log.warning("scheduling pass on submit failed: %s", type(exc).__name__)
        return False
    return not stats.deferred and not stats.unlocked


def note_paced(paced: bool) -> None:
    """The pass held placements back for the handover window (or no longer does). Never raises."""
    try:
        from euler.redis import client

        if paced:
            client().set(redis_key("paced"), 1, ex=60)  # beat's passes renew it while the window stays full
        else:
            client().delete(redis_key("paced"))
    except Exception as exc:  # noqa: BLE001 - beat's next pass places them anyway
        log.warning("scheduler pacing flag unavailable: %s", type(exc).__name__)


def request_pass_if_paced() -> None:
    """An attempt started, freeing a place in the handover window: a pass, if the last one was held back."""
    try:
        from euler.redis import client

        if not client().exists(redis_key("paced")):
            return
    except Exception:  # noqa: BLE001 - beat's next pass places them anyway
        return
    request_pass()


def request_pass_if_queued() -> None:
    """Resources were freed: a pass, if a job is queued for them. A pass places only queued jobs, and a job queued
    after this read asks for its own pass; so an end with nothing queued (the common case on an idle pool) costs
    one indexed read here instead of a Celery message and an empty pass. Never raises."""
    from django.db import DatabaseError

    try:
        if not _QUEUED_ONE():
            return
    except DatabaseError as exc:  # ask anyway: the pass reads it again
        log.warning("queued jobs not read: %s", type(exc).__name__)
    request_pass()


def _queued_one():
    from jobs.models import Job  # built at the first call: this module imports nothing of jobs/ at import time
    from jobs.states import JobState

    return Job.objects.filter(state=JobState.QUEUED).values_list("pk", flat=True)[:1]


_QUEUED_ONE = Prepared(_queued_one)


def schedule_on_commit(*, if_queued: bool = False, here: bool = False) -> None:
    """Ask for a scheduling pass once the current transaction commits (beat catches up if this is lost);
    `if_queued`: only if a job is queued then (an attempt's end freed resources, and nothing else is new); `here`:
    a submit, whose web process runs the pass too (pass_here)."""
    if if_queued:
        transaction.on_commit(request_pass_if_queued)
    else:
        transaction.on_commit(lambda: request_pass(here=here))


def wake_on_commit(node_id: int | None) -> None:
    if node_id is None:
        return
    from nodes import channel

    transaction.on_commit(lambda: channel.wake(node_id))


def wake_nodes(node_ids: list[int]) -> None:
    """nodes.channel.wake for many nodes in one Redis round trip (a lost wake-up only waits for the next poll)."""
    from euler.redis import client
    from nodes import channel

    try:
        pipe = client().pipeline(transaction=False)
        for node_id in node_ids:
            pipe.publish(f"{channel.WAKE_PREFIX}{node_id}", b"1")
        pipe.execute()
    except Exception as exc:  # noqa: BLE001 - never fail a committed pass over a wake-up
        log.warning("wake-up of %d nodes not sent: %s", len(node_ids), type(exc).__name__)
