"""Offline detection after a control-plane outage (found by the full stop and start chaos test).

Hosts reconnect one by one after the control plane comes back: the first heartbeat must not end the
silence hold for the others at once, or their attempts (often already finished) are lost and rerun.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from euler import redis as euler_redis
from nodes import liveness
from nodes.models import Node

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _no_silence_left(settings):
    settings.EULER_NODE_OFFLINE_AFTER = 30
    settings.EULER_NODE_SILENCE_HOLD = 90
    euler_redis.client().delete(liveness.SILENCE_KEY)
    yield
    euler_redis.client().delete(liveness.SILENCE_KEY)


def _online(name, last):
    return Node.objects.create(name=name, approval="approved", trust="platform", online=True, last_heartbeat_at=last)


def _heartbeat(node, at):
    Node.objects.filter(pk=node.pk).update(last_heartbeat_at=at)


def test_a_node_held_through_an_outage_gets_a_whole_window_after_the_first_node_comes_back():
    now = timezone.now()
    first = _online("first", now - timedelta(seconds=40))
    second = _online("second", now - timedelta(seconds=41))
    assert liveness.mark_offline(now=now) == []  # every node silent: the control plane's fault
    _heartbeat(first, now + timedelta(seconds=5))  # the first host reconnects
    assert liveness.mark_offline(now=now + timedelta(seconds=6)) == []
    assert liveness.mark_offline(now=now + timedelta(seconds=6 + 29)) == []
    _heartbeat(second, now + timedelta(seconds=20))  # the second one reconnects in time
    _heartbeat(first, now + timedelta(seconds=36))
    assert liveness.mark_offline(now=now + timedelta(seconds=37)) == []
    assert Node.objects.filter(online=True).count() == 2


def test_a_held_node_that_never_comes_back_goes_offline_one_window_after_the_others_did():
    now = timezone.now()
    first = _online("first", now - timedelta(seconds=40))
    gone = _online("gone", now - timedelta(seconds=41))
    assert liveness.mark_offline(now=now) == []
    _heartbeat(first, now + timedelta(seconds=5))
    assert liveness.mark_offline(now=now + timedelta(seconds=6)) == []
    _heartbeat(first, now + timedelta(seconds=36))
    assert liveness.mark_offline(now=now + timedelta(seconds=37)) == [gone.pk]


def test_a_node_that_went_silent_without_an_outage_still_goes_offline_at_once():
    now = timezone.now()
    dead = _online("dead", now - timedelta(seconds=40))
    _online("alive", now)
    assert liveness.mark_offline(now=now) == [dead.pk]
