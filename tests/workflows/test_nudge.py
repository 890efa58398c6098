"""The dispatch nudge (workflows/nudge.py): a pass asked for after job events commit, only where a hook is enabled."""

from __future__ import annotations

import pytest
from celery import current_app

from euler.redis import client
from workflows import nudge
from workflows.models import Webhook

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def asks(monkeypatch):
    """The dispatch passes asked for (the task's message, not run), with the debounce and Redis keys cleared."""
    asked: list[int] = []
    task = current_app.tasks[nudge.DISPATCH_TASK]
    monkeypatch.setattr(task, "apply_async", lambda *a, **k: asked.append(1))
    client().delete(nudge.hooks_key(), nudge.flag_key())

    def events_written() -> int:
        nudge._last = 0.0  # past the debounce
        client().delete(nudge.flag_key())  # no pass queued
        before = len(asked)
        nudge.on_events_written()
        return len(asked) - before

    yield events_written
    client().delete(nudge.hooks_key(), nudge.flag_key())


def test_no_pass_is_asked_for_while_no_hook_is_enabled(asks, project):
    assert asks() == 0
    assert client().get(nudge.hooks_key()) == b"0"  # kept: the next events cost one Redis read
    assert asks() == 0


def test_a_new_hook_is_heard_of_at_the_next_events(asks, project, settings):
    settings.EULER_WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    assert asks() == 0
    from workflows.webhooks import webhook_create

    hook, _ = webhook_create(project=project, url="http://127.0.0.1:9/x", event_names=["job.state_changed"])
    assert asks() == 1  # the stale "none" was dropped when the hook committed
    Webhook.objects.filter(pk=hook.pk).update(enabled=False)  # no signal: the kept answer stands until its TTL
    assert asks() == 1
    client().delete(nudge.hooks_key())  # the TTL passed: read from the database again
    assert asks() == 0
    hook.delete()
    assert client().get(nudge.hooks_key()) is None


def test_a_disabled_hook_in_the_admin_stops_the_asks(asks, project):
    hook = Webhook.objects.create(project=project, url="https://hooks.example/y", events=["job.state_changed"])
    assert asks() == 1
    hook.enabled = False
    hook.save()
    assert asks() == 0
