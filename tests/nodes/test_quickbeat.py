"""The quick heartbeat (quickbeat.py): a known node reporting nothing new is answered from memory with no round
trip, its Redis writes land in the next batch, and anything the cache cannot vouch for takes the verifying path."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from django.utils import timezone
from redis.exceptions import ConnectionError as RedisConnectionError

from nodeagent import protocol
from nodes import beathooks, beatmemo, channel, liveness, livestore, memory, quickbeat, services
from nodes.models import Node
from nodes.node_api.views import _parser
from tests.nodes.conftest import resources

pytestmark = pytest.mark.django_db

LOOP = object()  # stands for the event loop whose subscription vouches for the cache


def _body(**res) -> bytes:
    return json.dumps({"agent_version": "t", "resources": resources(**res), "running": []}).encode()


def _beat(cred: str, body: bytes | None = None, loop=LOOP):
    body = body or _body()
    return quickbeat.heartbeat(raw=cred, body=body, parse=_parser(body), loop=loop)


def _down(*args, **kwargs):
    raise RedisConnectionError("Redis is down")


@pytest.fixture
def quick(platform_node, heartbeat):
    """An approved node cached by this process while the invalidation subscription holds."""
    node, cred = platform_node
    services.node_approve(node=node)
    quickbeat.subscribed(LOOP)
    assert heartbeat(cred).status_code == 200  # the verifying path caches the row and runs the hooks
    return node, cred


def test_a_known_node_reporting_nothing_new_is_answered_from_memory(quick, monkeypatch, django_assert_num_queries):
    node, cred = quick
    before = time.time()
    with monkeypatch.context() as m, django_assert_num_queries(0):
        m.setattr(livestore, "client", _down)  # no Redis either
        reply = _beat(cred)
    assert reply is not None
    expected = protocol.HeartbeatReply(
        approval="approved", heartbeat_interval=reply["heartbeat_interval"], poll_wait=reply["poll_wait"]
    )
    assert reply == expected.model_dump(mode="json")
    assert livestore.seen_many([node.pk]).get(node.pk, 0) < before  # not written yet: it waits for the batch
    assert quickbeat.flush_batch() == 1
    assert livestore.seen_many([node.pk])[node.pk] >= before
    assert livestore.intervals_many([node.pk])[node.pk] == pytest.approx(reply["heartbeat_interval"], rel=0.3)


def test_what_the_cache_cannot_vouch_for_takes_the_verifying_path(quick, settings):
    node, cred = quick
    assert _beat(cred) is not None
    assert _beat(cred, loop=object()) is None  # no subscription on this loop
    assert _beat(cred, _body(cpu_milli=16000)) is None  # a changed report: the row must be written
    assert _beat("enode_" + "x" * 40) is None  # not a node this process knows
    quickbeat.hooks_ran(node.pk, beatmemo.local(node.pk).rfp, 0)
    assert _beat(cred) is None  # the hooks asked to look again
    quickbeat.hooks_ran(node.pk, beatmemo.local(node.pk).rfp, time.time())
    assert _beat(cred) is not None
    beatmemo.set_last_intake(time.time() - settings.EULER_NODE_OFFLINE_AFTER)
    assert _beat(cred) is None  # the first heartbeat after a quiet spell looks for a control-plane gap


def test_a_row_change_published_over_the_subscription_drops_the_cached_copy(quick, monkeypatch):
    node, cred = quick
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(channel._listener())  # the real subscription: it clears the cache when it starts
        assert _beat(cred, loop=loop) is None
        liveness.heartbeat(raw=cred, parse=_parser(_body()))  # cached again
        assert _beat(cred, loop=loop) is not None
        dropped = asyncio.Event()
        real = memory.invalidate

        def invalidate(ids):
            real(ids)
            if node.pk in ids:
                dropped.set()

        monkeypatch.setattr(memory, "invalidate", invalidate)
        services.node_drain(node=Node.objects.get(pk=node.pk))
        loop.run_until_complete(asyncio.wait_for(dropped.wait(), timeout=10))
        quick = _beat(cred, loop=loop)  # the stale copy is gone: the verifying path, or the row read again
        assert quick is None or quick["draining"] is True
        reply = liveness.heartbeat(raw=cred, parse=_parser(_body()))
        assert reply.draining is True
    finally:
        for task in asyncio.all_tasks(loop):
            task.cancel()
        loop.run_until_complete(asyncio.sleep(0.05))
        loop.close()


def test_a_row_read_before_an_invalidation_is_not_cached_after_it(quick):
    node, cred = quick
    lookup = Node.objects.get(pk=node.pk).credential_lookup
    known = memory.known(lookup)
    memory.forget_all()
    taken = quickbeat.token()
    quickbeat.invalidate([node.pk])  # the row changed between the read and the caching
    memory.remember(lookup, known, taken)
    assert memory.known(lookup) is None
    memory.remember(lookup, known, quickbeat.token())
    assert memory.known(lookup) is not None


def test_an_invalidation_names_nodes_and_skips_the_writer_s_own():
    assert livestore.parse_invalidation("|1,2,x,3") == [1, 2, 3]
    assert livestore.parse_invalidation(b"other|4") == [4]
    assert livestore.parse_invalidation(f"{livestore.PROCESS_ID}|5") == []


def test_a_batch_that_cannot_reach_redis_lands_in_the_node_rows_and_stops_the_quick_path(quick, monkeypatch):
    node, cred = quick
    Node.objects.filter(pk=node.pk).update(last_heartbeat_at=timezone.now() - timezone.timedelta(minutes=5))
    assert _beat(cred) is not None
    monkeypatch.setattr(livestore, "client", _down)
    assert quickbeat.flush_batch() == 1
    node.refresh_from_db()
    assert (timezone.now() - node.last_heartbeat_at).total_seconds() < 30
    assert _beat(cred) is None  # off for a while, and the cache is gone: heartbeats write the row
    assert memory.cached_count() == 0


def test_rows_an_invalidation_dropped_are_read_again_in_bulk(quick, monkeypatch, django_assert_max_num_queries):
    """A bulk change (approving a thousand nodes) must not send each node's next heartbeat down the full path:
    the refresher reads the dropped rows again, a chunk per query, and the quick path goes on."""
    node, cred = quick
    assert _beat(cred) is not None
    Node.objects.filter(pk=node.pk).update(draining=True)
    livestore.bump(node.pk)  # what a saved row does; the subscription hands the ids to quickbeat.invalidate
    assert quickbeat.invalidate([node.pk]) == [node.pk]
    assert _beat(cred) is None  # dropped
    memory.queue_refresh([node.pk])  # what refresh_later queues for the refresher thread
    with django_assert_max_num_queries(1):
        assert quickbeat.refresh_pending() == 1
    reply = _beat(cred)
    assert reply is not None and reply["draining"] is True
    Node.objects.filter(pk=node.pk).update(approval="rejected")
    memory.queue_refresh(quickbeat.invalidate([node.pk]))
    assert quickbeat.refresh_pending() == 0  # a rejected node is not cached again: its credential is refused
    assert _beat(cred) is None


def test_a_new_subscription_reads_every_node_redis_has_seen_into_the_cache(quick):
    """A restarted web process: the first heartbeat of each node must not be a full path of its own."""
    node, cred = quick
    memory.forget_all()
    assert _beat(cred) is None
    memory.queue_refresh(everyone=True)  # what refresh_later(everyone=True) queues
    assert quickbeat.refresh_pending() == 1
    assert _beat(cred) is not None


def test_a_heartbeat_sent_down_the_verifying_path_is_seen_at_arrival(quick):
    """Liveness does not wait for the heartbeat threads: a node whose report changed (or whose hooks are due) is
    alive whatever they find, and a job burst can keep them busy past the offline window."""
    node, cred = quick
    quickbeat.flush_batch()
    before = time.time()
    assert _beat(cred, _body(cpu_milli=16000)) is None  # a changed report: the verifying path writes the row
    assert quickbeat.flush_batch() == 1
    assert livestore.seen_many([node.pk])[node.pk] >= before


def test_the_periodic_hooks_run_beside_a_reply_from_memory_and_what_they_find_comes_next_time(
    quick, monkeypatch, settings
):
    node, cred = quick
    ran = []

    def inline(node_, body, rfp, now):  # the heartbeat thread's work, here and now
        ran.append(node_.pk)
        beathooks.hooks_in_background(node_, body, rfp, now)

    monkeypatch.setattr(quickbeat, "hooks_later", inline)
    beatmemo.local(node.pk).hooks_at = time.time() - settings.EULER_NODE_HOOKS_EVERY - 1
    assert _beat(cred) is not None and ran == [node.pk]  # answered now; the hooks ran beside it
    assert _beat(cred) is not None and ran == [node.pk]  # not again within the period
    monkeypatch.setattr(channel, "_heartbeat_hooks", [lambda n, hb: [protocol.Command(type="stop_attempt",
                                                                                       attempt_id=7, reason="stale")]])  # fmt: skip
    beatmemo.local(node.pk).hooks_at = time.time() - settings.EULER_NODE_HOOKS_EVERY - 1
    assert _beat(cred) is not None  # this reply has no command yet ...
    assert _beat(cred) is None  # ... the hooks found one: the next heartbeat takes the verifying path
    reply = liveness.heartbeat(raw=cred, parse=_parser(_body()))
    assert [c.attempt_id for c in reply.commands] == [7]
