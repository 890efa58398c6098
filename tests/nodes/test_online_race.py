"""A heartbeat racing the offline sweep: the node is never revived without its ONLINE event (issue 28)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from nodeagent import protocol
from nodes import liveness, services
from nodes.models import EventKind, Node
from nodes.signals import node_available

pytestmark = pytest.mark.django_db


def test_a_beat_read_before_the_offline_sweep_and_written_after_it_brings_the_node_back_with_its_event(
    platform_node, heartbeat, settings, django_capture_on_commit_callbacks
):
    node, cred = platform_node
    services.node_approve(node=node)
    assert heartbeat(cred).status_code == 200
    # The heartbeat's full path reads the row (online) ...
    read = Node.objects.get(pk=node.pk)
    assert read.online
    # ... the offline sweep runs between its read and its write: the node goes offline, its attempts are lost ...
    later = timezone.now() + timedelta(seconds=settings.EULER_NODE_OFFLINE_AFTER + 1)
    assert liveness.mark_offline(now=later) == [node.pk]
    # ... and the heartbeat writes what it was given (a changed report: the row is written).
    seen = []
    node_available.connect(lambda sender, node_id, **kw: seen.append(node_id), weak=False, dispatch_uid="race")
    try:
        hb = protocol.Heartbeat(agent_version="t", resources=protocol.Resources(cpu_milli=2000, memory_bytes=1 << 30))
        with django_capture_on_commit_callbacks(execute=True):
            liveness.node_heartbeat(node=read, hb=hb)
    finally:
        node_available.disconnect(dispatch_uid="race")
    node.refresh_from_db()
    kinds = list(node.events.order_by("created_at", "id").values_list("kind", flat=True))
    assert kinds.count(EventKind.OFFLINE) == 1
    if node.online:  # back online only through the transition: its event after the offline one, and a pass
        assert kinds[-1] == EventKind.ONLINE, kinds
        assert seen == [node.pk]
