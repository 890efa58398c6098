"""A dispatch pass soon after job events commit, rather than at beat's next tick (EULER_WEBHOOK_DISPATCH_TICK).

Every write of job events ends in `jobs.signals.events_written` (after commit). This asks for one pass on the
`dispatch` queue unless one is already queued and not yet started (a Redis flag the pass clears as it starts), so
a flood of events costs back-to-back passes, never a growing queue of them; each process also asks at most once
per DEBOUNCE. Beat's tick stays as the backstop when a message or the flag is lost. Never raises.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time

from django.conf import settings
from django.db import connection

log = logging.getLogger(__name__)

DISPATCH_TASK = "workflows.tasks.webhook_dispatch"
DEBOUNCE = 0.05  # seconds between two asks from one process
FLAG_TTL = 30  # seconds: a flag whose pass never started (a lost message) stops blocking asks after this

_lock = threading.Lock()
_last = 0.0


def flag_key() -> str:
    return f"euler:workflows:dispatch-queued:{connection.settings_dict.get('NAME')}"


def _due(now: float) -> bool:
    global _last
    with _lock:
        if now - _last < DEBOUNCE:
            return False
        _last = now
        return True


def on_events_written(**_kwargs) -> None:
    if not settings.EULER_WEBHOOK_DISPATCH_NUDGE or not _due(time.monotonic()):
        return
    try:
        from euler.redis import client

        if not client().set(flag_key(), 1, nx=True, ex=FLAG_TTL):
            return  # a pass is queued and will see these events
    except Exception as exc:  # noqa: BLE001 - without Redis, beat's tick dispatches
        log.warning("webhook dispatch flag unavailable: %s", type(exc).__name__)
        return
    try:
        from celery import current_app

        current_app.tasks[DISPATCH_TASK].apply_async()  # by name: workflows.tasks imports this module
    except Exception as exc:  # noqa: BLE001 - the broker being down only delays to beat's tick
        log.warning("webhook dispatch not requested: %s", type(exc).__name__)


def pass_started() -> None:
    """The pass clears the flag as it starts: events written from now on ask for the next one."""
    from euler.redis import client

    with contextlib.suppress(Exception):  # without Redis the flag's TTL ends the wait for the next ask
        client().delete(flag_key())
