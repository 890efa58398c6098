"""The poll snapshot (nodes/channel.py, jobs.node_hooks.busy_nodes): which nodes' first polls need no query."""

from __future__ import annotations

import pytest

from nodes import channel
from tests.nodes.test_poll import _in_loop, _until


@pytest.mark.django_db(transaction=True)
def test_a_new_subscription_knows_which_nodes_have_nothing_from_one_snapshot(placed_on):
    """A restarted web process: 10,000 nodes' first polls must not each ask the database. The snapshot (one query
    as the subscription starts) names the nodes with something outstanding; the others wait without asking,
    until a wake-up, an invalidation or a reconnect."""
    busy, idle = placed_on

    async def scenario():
        listener = await channel._listener()
        await _until(lambda: listener.snapshot is not None)
        assert busy in listener.snapshot and idle not in listener.snapshot
        async with channel.Waiter(idle) as w:
            assert w.quiet()
        async with channel.Waiter(busy) as w:
            assert not w.quiet()  # an assignment waits for it
        channel.wake(idle)
        await _until(lambda: idle in listener.woken)
        async with channel.Waiter(idle) as w:
            assert not w.quiet()  # woken since the snapshot: ask
        listener._wake_all()
        assert listener.snapshot is None  # a reconnect takes a new one

    _in_loop(scenario)


@pytest.fixture
def placed_on(submit, make_node, schedule):
    """(a node with a job assigned to it, a node with nothing)."""
    from jobs.models import Attempt

    busy = make_node(name="busy")
    submit()
    schedule()  # (a transactional test's commit may already have run the pass)
    idle = make_node(name="idle")
    assert Attempt.objects.get().node_id == busy.pk
    return busy.pk, idle.pk
