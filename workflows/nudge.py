"""A dispatch pass soon after job events commit, rather than at beat's next tick (EULER_WEBHOOK_DISPATCH_TICK).

Every write of job events ends in `jobs.signals.events_written` (after commit). This asks for one pass on the
`dispatch` queue unless one is already queued and not yet started (a Redis flag the pass clears as it starts), so
a flood of events costs back-to-back passes, never a growing queue of them; each process also asks at most once
per DEBOUNCE. Beat's tick stays as the backstop when a message or the flag is lost. Never raises.

With no enabled webhook anywhere there is nothing to dispatch: no pass is asked for (a pass and its Celery message
cost the dispatch worker ~40 ms of CPU per job, and on SQLite its writes queue behind the reports'). Whether any
hook is enabled is kept in Redis (HOOKS_TTL), read once per ask and computed from the database when missing; a
webhook saved or deleted removes it, at once and again after its commit. A stale "none" (computed by a process
that read the database just before a hook's commit) lasts at most HOOKS_TTL, during which beat's tick dispatches.
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
HOOKS_TTL = 60  # seconds the "is any webhook enabled" answer is trusted before it is read from the database again

_lock = threading.Lock()
_last = 0.0


def flag_key() -> str:
    return f"euler:workflows:dispatch-queued:{connection.settings_dict.get('NAME')}"


def hooks_key() -> str:
    return f"euler:workflows:hooks-enabled:{connection.settings_dict.get('NAME')}"


def hooks_enabled(r) -> bool:
    """Whether any webhook is enabled: Redis's answer, else the database's (then kept for HOOKS_TTL)."""
    known = r.get(hooks_key())
    if known is not None:
        return known == b"1"
    from workflows.models import Webhook

    enabled = Webhook.objects.filter(enabled=True).exists()
    r.set(hooks_key(), b"1" if enabled else b"0", ex=HOOKS_TTL)
    return enabled


def hooks_changed(**_kwargs) -> None:
    """A webhook saved or deleted: forget the answer now and once the change commits (a read in between may
    have kept the old one)."""
    from django.db import transaction

    _forget_hooks()
    transaction.on_commit(_forget_hooks)


def _forget_hooks() -> None:
    try:
        from euler.redis import client

        client().delete(hooks_key())
    except Exception as exc:  # noqa: BLE001 - the answer's TTL ends it
        log.warning("webhook answer not cleared: %s", type(exc).__name__)


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

        r = client()
        if not hooks_enabled(r):
            return  # nothing to deliver to: beat's tick covers a hook whose news has not arrived yet
        if not r.set(flag_key(), 1, nx=True, ex=FLAG_TTL):
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
