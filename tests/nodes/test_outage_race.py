"""The first heartbeat after a control-plane outage against an offline pass that runs in the middle of it.

A heartbeat is several steps (Redis's last-seen time and intake swap, the row, the note of when heartbeats
resumed); a pass that ran between them saw one host back, the other still silent and no outage on record, and
marked the other offline the instant the first host returned (its jobs lost and run again: the full stop chaos
test, about one run in four). Each test forces a pass into one gap between the steps.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from nodeagent import protocol
from nodes import beatmemo, lastseen, liveness, livestore, memory, services
from nodes.models import Node
from tests.nodes.conftest import resources

pytestmark = pytest.mark.django_db


@pytest.fixture
def outage(settings, enroll, make_user):
    """Two approved hosts, both last heard 40 s ago (the control plane was down 40 s): returns (a, a's
    credential, b). Redis still holds the time of the last heartbeat before the outage."""
    settings.EULER_NODE_OFFLINE_AFTER = 30
    settings.EULER_NODE_SILENCE_HOLD = 90
    livestore.reset()
    memory.reset()
    beatmemo.reset()
    ops = make_user("ops", staff=True)
    (a, cred), (b, _) = (enroll(services.enrollment_token_create(trust="platform", by=ops)[1], n) for n in "ab")
    for node in (a, b):
        services.node_approve(node=node)
    liveness.heartbeat(raw=cred, parse=_parse)  # this process knows a's row (its next heartbeat is a fast one)
    before = timezone.now() - timedelta(seconds=40)
    Node.objects.filter(pk__in=[a.pk, b.pk]).update(online=True, last_heartbeat_at=before)
    livestore.client().zadd(f"{livestore.ns()}seen", {str(a.pk): before.timestamp(), str(b.pk): before.timestamp()})
    livestore.client().set(f"{livestore.ns()}intake", before.timestamp())
    livestore.client().delete(f"{livestore.ns()}resumed")
    beatmemo.reset()
    yield Node.objects.get(pk=a.pk), cred, Node.objects.get(pk=b.pk)
    livestore.reset()
    memory.reset()


def _parse():
    return protocol.Heartbeat.model_validate({"agent_version": "t", "resources": resources(), "running": []})


def _held(b: Node) -> bool:
    """The silent host is still online and the next pass keeps it (it has a window from the return)."""
    return liveness.mark_offline() == [] and Node.objects.get(pk=b.pk).online


def _passes_inside_the_full_path(monkeypatch) -> list:
    """An offline pass right after the full path wrote the row, and another after its Redis pipeline (the beat's
    last-seen time) but before it noted when heartbeats resumed."""
    passes = []
    row, note = liveness.node_heartbeat, lastseen.note_resumed

    def node_heartbeat(**kw):
        done = row(**kw)
        passes.append(liveness.mark_offline())
        return done

    def note_resumed(*args, **kw):
        passes.append(liveness.mark_offline())
        return note(*args, **kw)

    monkeypatch.setattr(liveness, "node_heartbeat", node_heartbeat)
    monkeypatch.setattr(lastseen, "note_resumed", note_resumed)
    return passes


def test_a_pass_between_the_fast_paths_redis_step_and_its_database_step_holds_the_silent_host(outage):
    a, cred, b = outage
    found = liveness.fast_heartbeat(raw=cred, parse=_parse)
    assert isinstance(found, liveness.Later) and found.gap  # the database step is left to do
    assert liveness.mark_offline() == []  # a sees itself back, b still silent: b is held, not offline
    liveness.finish_heartbeat(raw=cred, found=found, parse=_parse, who=None)
    assert _held(b)


def test_a_pass_inside_the_full_path_holds_the_silent_host(outage, monkeypatch):
    a, cred, b = outage
    memory.reset()  # a web process that has not seen the host: its first heartbeat takes the full path
    passes = _passes_inside_the_full_path(monkeypatch)
    liveness.heartbeat(raw=cred, parse=_parse)
    assert passes == [[], []]
    assert _held(b)


def test_into_an_emptied_redis_a_pass_waits_until_the_gap_is_settled_from_the_database(outage, monkeypatch):
    a, cred, b = outage
    livestore.reset()  # Redis came back empty with the rest (the full stop)
    memory.reset()
    passes = _passes_inside_the_full_path(monkeypatch)
    liveness.heartbeat(raw=cred, parse=_parse)
    assert passes == [[], []]  # pending: the time before the gap was being looked up
    resumed, before = livestore.resumed()
    assert before == pytest.approx(b.last_heartbeat_at.timestamp())  # from b's row: a's own is no evidence
    assert _held(b)


def test_into_an_emptied_redis_the_fast_paths_swap_carries_over_to_the_full_path(outage):
    a, cred, b = outage
    livestore.reset()  # the process still holds a's row; Redis lost its generation: the full path runs
    found = liveness.fast_heartbeat(raw=cred, parse=_parse)
    assert isinstance(found, liveness.Later) and found.node is None and found.swapped and found.previous is None
    assert liveness.mark_offline() == []
    liveness.finish_heartbeat(raw=cred, found=found, parse=_parse, who=None)
    assert livestore.resumed()[1] == pytest.approx(b.last_heartbeat_at.timestamp())  # settled, not left pending
    assert _held(b)


def test_an_emptied_redis_without_a_gap_settles_to_no_outage(outage):
    a, cred, b = outage
    Node.objects.filter(pk=b.pk).update(last_heartbeat_at=timezone.now())  # b beat just now: no outage
    livestore.reset()
    memory.reset()
    liveness.heartbeat(raw=cred, parse=_parse)
    assert livestore.resumed() == (0.0, 0.0)


def test_a_host_that_never_returns_goes_offline_one_window_after_the_first_came_back(outage):
    a, cred, b = outage
    liveness.heartbeat(raw=cred, parse=_parse)
    assert _held(b)
    later = timezone.now() + timedelta(seconds=31)
    livestore.client().zadd(f"{livestore.ns()}seen", {str(a.pk): later.timestamp()})  # a kept beating
    assert liveness.mark_offline(now=later) == [b.pk]
