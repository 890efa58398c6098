from datetime import timedelta

import pytest
from django.utils import timezone

from nodes import liveness, services
from nodes.models import EventKind, Node
from nodes.signals import node_offline
from nodes.tasks import mark_offline

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def approved_online(platform_node, heartbeat):
    node, cred = platform_node
    services.node_approve(node=node)
    heartbeat(cred)
    return node, cred


def test_a_silent_node_goes_offline_once_with_an_event_and_the_signal(approved_online, settings):
    node, _ = approved_online
    seen = []

    def listener(sender, node_id, **kw):
        seen.append(node_id)

    node_offline.connect(listener)
    try:
        later = timezone.now() + timedelta(seconds=settings.EULER_NODE_OFFLINE_AFTER + 1)
        assert liveness.mark_offline(now=later) == [node.pk]
        assert liveness.mark_offline(now=later) == []
    finally:
        node_offline.disconnect(listener)
    node.refresh_from_db()
    assert not node.online and seen == [node.pk]
    assert node.events.filter(kind=EventKind.OFFLINE).count() == 1


def test_a_node_within_the_window_stays_online(approved_online):
    assert mark_offline() == 0
    assert Node.objects.get().online


def test_a_node_that_heartbeats_again_is_back_online(approved_online, heartbeat, settings):
    node, cred = approved_online
    liveness.mark_offline(now=timezone.now() + timedelta(seconds=settings.EULER_NODE_OFFLINE_AFTER + 1))
    heartbeat(cred)
    node.refresh_from_db()
    assert node.online
    assert node.events.filter(kind=EventKind.ONLINE).count() == 1  # back online (it was online from enrollment)


def test_the_beat_schedule_runs_the_offline_task():
    from django.conf import settings

    assert settings.CELERY_BEAT_SCHEDULE["nodes-mark-offline"]["task"] == "nodes.tasks.mark_offline"


def _online(name, last):
    return Node.objects.create(name=name, approval="approved", trust="platform", online=True, last_heartbeat_at=last)


def test_when_every_online_node_goes_silent_at_once_offline_detection_holds(settings):
    settings.EULER_NODE_OFFLINE_AFTER = 30
    settings.EULER_NODE_SILENCE_HOLD = 90
    now = timezone.now()
    _online("a", now - timedelta(seconds=40))
    _online("b", now - timedelta(seconds=45))
    assert liveness.mark_offline(now=now) == []
    assert Node.objects.filter(online=True).count() == 2
    assert len(liveness.mark_offline(now=now + timedelta(seconds=90))) == 2


def test_one_silent_node_among_live_ones_goes_offline_at_once(settings):
    settings.EULER_NODE_OFFLINE_AFTER = 30
    now = timezone.now()
    dead = _online("dead", now - timedelta(seconds=40))
    _online("alive", now)
    assert liveness.mark_offline(now=now) == [dead.pk]


def test_a_lone_node_that_goes_silent_goes_offline(settings):
    settings.EULER_NODE_OFFLINE_AFTER = 30
    now = timezone.now()
    lone = _online("lone", now - timedelta(seconds=31))
    assert liveness.mark_offline(now=now) == [lone.pk]
