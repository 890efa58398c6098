"""Invocation records: appended in memory on the hot path, bulk-inserted by a background thread.

The request path only appends a tuple to a deque (no I/O); a daemon thread flushes every
EULER_GATEWAY_FLUSH_INTERVAL seconds or as soon as EULER_GATEWAY_FLUSH_SIZE records wait.
If the database is away, records stay buffered up to EULER_GATEWAY_BUFFER_MAX (oldest dropped).
"""

from __future__ import annotations

import atexit
import logging
import threading
from collections import deque
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import DatabaseError, close_old_connections, transaction

from euler import metrics

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Record:
    project_id: int
    agent_id: int
    instance_id: int | None
    method: str
    path: str
    status: int
    latency_ms: float
    ttfb_ms: float | None
    bytes_in: int
    bytes_out: int
    error: str
    request_id: str
    created_at: datetime


_buffer: deque[Record] = deque()
_wake = threading.Event()
_flush_lock = threading.Lock()
_thread: threading.Thread | None = None
_start_lock = threading.Lock()
autostart = True  # tests switch the thread off and call flush() themselves
dropped = 0


def add(record: Record) -> None:
    global dropped
    if len(_buffer) >= settings.EULER_GATEWAY_BUFFER_MAX:
        _buffer.popleft()
        dropped += 1
    _buffer.append(record)
    if record.ttfb_ms is not None:
        metrics.observe("euler_gateway_latency_seconds", record.ttfb_ms / 1000)
    if autostart and _thread is None:
        _start()
    if len(_buffer) >= settings.EULER_GATEWAY_FLUSH_SIZE:
        _wake.set()


def pending() -> int:
    return len(_buffer)


def _rows(records: list[Record]):
    from gateway.models import Invocation

    return [Invocation(**record.__dict__) for record in records]


def flush() -> int:
    """Write every buffered record now; returns how many were written."""
    from gateway.models import Invocation

    with _flush_lock:
        batch: list[Record] = []
        while _buffer:
            batch.append(_buffer.popleft())
        if not batch:
            return 0
        try:
            with transaction.atomic():
                Invocation.objects.bulk_create(_rows(batch), batch_size=1000)
            return len(batch)
        except DatabaseError:
            # Usually an agent or instance deleted meanwhile: keep the rows that still point somewhere.
            return _flush_survivors(batch)


def _flush_survivors(batch: list[Record]) -> int:
    from agents.models import Agent, AgentInstance
    from gateway.models import Invocation

    try:
        agents = set(Agent.objects.filter(pk__in={r.agent_id for r in batch}).values_list("pk", flat=True))
        instances = set(
            AgentInstance.objects.filter(pk__in={r.instance_id for r in batch}).values_list("pk", flat=True)
        )
        kept = [
            Record(**{**r.__dict__, "instance_id": r.instance_id if r.instance_id in instances else None})
            for r in batch
            if r.agent_id in agents
        ]
        with transaction.atomic():
            Invocation.objects.bulk_create(_rows(kept), batch_size=1000)
        return len(kept)
    except DatabaseError:
        log.exception("could not write %d invocation records; keeping them for the next flush", len(batch))
        _buffer.extendleft(reversed(batch))
        return 0


def _loop() -> None:
    while True:
        _wake.wait(settings.EULER_GATEWAY_FLUSH_INTERVAL)
        _wake.clear()
        try:
            flush()
        except Exception:  # noqa: BLE001 - the flusher must survive anything and try again
            log.exception("invocation flush failed")
        finally:
            close_old_connections()


def _start() -> None:
    global _thread
    with _start_lock:
        if _thread is None:
            _thread = threading.Thread(target=_loop, name="euler-invocation-recorder", daemon=True)
            _thread.start()
            atexit.register(_flush_at_exit)


def _flush_at_exit() -> None:
    try:
        flush()
    except Exception:  # noqa: BLE001
        log.exception("invocation flush at exit failed")


def discard() -> None:
    """Drop whatever is buffered (tests)."""
    _buffer.clear()
