"""Offline detection after a control-plane outage (found by the full stop and start chaos test).

Hosts reconnect one by one after the control plane comes back: the first heartbeat must not end the
silence hold for the others at once, or their attempts (often already finished) are lost and rerun.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from nodes import liveness, livestore
from nodes.models import Node

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _no_outage_left(settings):
    settings.EULER_NODE_OFFLINE_AFTER = 30
    settings.EULER_NODE_SILENCE_HOLD = 90
    livestore.reset()
    yield
    livestore.reset()


def _online(name, last):
    return Node.objects.create(name=name, approval="approved", trust="platform", online=True, last_heartbeat_at=last)


def _heartbeats(node, start, end, now):
    """The node heartbeats every 5 s from now+start to now+end (seconds)."""
    for t in range(start, end + 1, 5):
        liveness.note_intake(now + timedelta(seconds=t))
        Node.objects.filter(pk=node.pk).update(last_heartbeat_at=now + timedelta(seconds=t))


def test_a_node_held_through_an_outage_gets_a_whole_window_after_the_first_node_comes_back():
    now = timezone.now()
    first = _online("first", now - timedelta(seconds=40))
    second = _online("second", now - timedelta(seconds=41))
    assert liveness.mark_offline(now=now) == []  # every node silent: the control plane's fault
    _heartbeats(first, 5, 5, now)  # the first host reconnects
    assert liveness.mark_offline(now=now + timedelta(seconds=6)) == []
    _heartbeats(first, 10, 30, now)
    assert liveness.mark_offline(now=now + timedelta(seconds=33)) == []
    _heartbeats(second, 33, 33, now)  # the second one reconnects within its window
    _heartbeats(first, 35, 35, now)
    assert liveness.mark_offline(now=now + timedelta(seconds=37)) == []
    assert Node.objects.filter(online=True).count() == 2


def test_a_held_node_that_never_comes_back_goes_offline_one_window_after_the_others_did():
    now = timezone.now()
    first = _online("first", now - timedelta(seconds=40))
    gone = _online("gone", now - timedelta(seconds=41))
    assert liveness.mark_offline(now=now) == []
    _heartbeats(first, 5, 30, now)
    assert liveness.mark_offline(now=now + timedelta(seconds=31)) == []
    _heartbeats(first, 35, 35, now)
    assert liveness.mark_offline(now=now + timedelta(seconds=36)) == [gone.pk]


def test_the_worker_need_not_have_seen_the_outage_for_the_late_host_to_get_its_window():
    now = timezone.now()
    first = _online("first", now - timedelta(seconds=40))
    late = _online("late", now - timedelta(seconds=41))
    _heartbeats(first, 0, 0, now)  # the first host is back before any offline check ran
    assert liveness.mark_offline(now=now + timedelta(seconds=1)) == []
    _heartbeats(first, 5, 30, now)
    assert liveness.mark_offline(now=now + timedelta(seconds=31)) == [late.pk]


def test_a_node_that_went_silent_without_an_outage_still_goes_offline_at_once():
    now = timezone.now()
    dead = _online("dead", now - timedelta(seconds=40))
    alive = _online("alive", now - timedelta(seconds=40))
    _heartbeats(alive, -40, 0, now)  # the other node's heartbeats never stopped
    assert liveness.mark_offline(now=now) == [dead.pk]


def test_a_node_already_silent_before_the_outage_is_not_held_by_it():
    now = timezone.now()
    dead = _online("dead", now - timedelta(seconds=60))
    first = _online("first", now - timedelta(seconds=35))
    _heartbeats(first, 0, 0, now)
    assert liveness.mark_offline(now=now + timedelta(seconds=1)) == [dead.pk]
