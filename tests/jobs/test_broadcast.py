"""Job state broadcasts: sent from a web process's event loop in order, without holding the request that made the
move (a node's running report waits for no watcher), and still sent at once where no event loop serves the thread."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer

from jobs import broadcast

pytestmark = pytest.mark.django_db(transaction=True)


async def listen(job_id: int) -> tuple:
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(broadcast.group_name(job_id), channel)
    return layer, channel


async def received(layer, channel, n: int) -> list[dict]:
    return [await asyncio.wait_for(layer.receive(channel), timeout=10) for _ in range(n)]


async def test_moves_made_in_a_request_thread_reach_the_watchers_in_their_order():
    layer, channel = await listen(7)

    def request():  # what a report or a cancel does after its commit, on the thread the web process gives it
        for state, node in (("assigned", "n1"), ("running", "n1"), ("succeeded", "")):
            broadcast.on_commit([(7, state, node)])

    await sync_to_async(request)()
    got = await received(layer, channel, 3)
    assert got == [  # where an assigned or running job is, so that a watcher need not read the job
        {"type": "job.state", "state": "assigned", "terminal": False, "node": "n1"},
        {"type": "job.state", "state": "running", "terminal": False, "node": "n1"},
        {"type": "job.state", "state": "succeeded", "terminal": True},
    ]


async def test_a_moves_own_fields_are_in_its_message():
    layer, channel = await listen(8)
    await sync_to_async(broadcast.on_commit)([(8, "succeeded", "", {"attempt_id": 3, "log_seq": 41})])
    assert await received(layer, channel, 1) == [
        {"type": "job.state", "state": "succeeded", "terminal": True, "attempt_id": 3, "log_seq": 41}
    ]


async def test_a_watcher_in_this_process_is_told_before_the_layer_sends_and_stops_when_it_asks():
    told: list[dict] = []
    stop = broadcast.listen_here(9, told.append)
    sent = []

    class Layer:
        async def group_send(self, group: str, message: dict) -> None:
            sent.append(list(told))  # what the watcher here had been told when the layer sent

    await broadcast._send_all(Layer(), [(9, "running", "n1"), (10, "running", "n2")])
    assert told == [{"type": "job.state", "state": "running", "terminal": False, "node": "n1"}]
    assert sent[0] == told
    stop()
    await broadcast._send_all(Layer(), [(9, "succeeded", "")])
    assert len(told) == 1 and not broadcast._here


class HeldLayer:
    """A channel layer whose sends wait until the test lets them go."""

    def __init__(self):
        self.go, self.done = asyncio.Event(), asyncio.Event()
        self.sent: list[dict] = []

    async def group_send(self, group: str, message: dict) -> None:
        await self.go.wait()
        self.sent.append(message)
        self.done.set()


async def test_the_request_that_made_the_move_does_not_wait_for_the_send(monkeypatch):
    layer = HeldLayer()
    monkeypatch.setattr("channels.layers.get_channel_layer", lambda *args: layer)
    await asyncio.wait_for(sync_to_async(broadcast.on_commit)([(7, "running", "")]), timeout=10)
    assert layer.sent == []  # answered while the send waits
    layer.go.set()
    await asyncio.wait_for(layer.done.wait(), timeout=10)
    assert layer.sent == [{"type": "job.state", "state": "running", "terminal": False}]


def test_without_an_event_loop_serving_the_thread_the_move_is_sent_before_returning(monkeypatch):
    sent = []

    class Layer:
        async def group_send(self, group: str, message: dict) -> None:
            sent.append((group, message))

    monkeypatch.setattr("channels.layers.get_channel_layer", lambda *args: Layer())
    broadcast.on_commit([(7, "cancelled", "")])  # a Celery task, the admin: async_to_sync, as before
    assert sent == [("jobs.7", {"type": "job.state", "state": "cancelled", "terminal": True})]


def test_a_workers_sends_go_out_in_order_on_one_loop_of_its_own_with_the_real_layer(settings):
    """A scheduling pass's moves (a Celery worker: no event loop serves the thread) through channels_redis: each
    send runs on the process's one sender loop, whose Redis connections last, instead of a loop, a thread and new
    connections each time; the watchers get them in their order."""
    import threading

    import config.settings as shipped

    settings.CHANNEL_LAYERS = shipped.CHANNEL_LAYERS
    layer = get_channel_layer()
    assert type(layer).__name__ == "RedisChannelLayer"

    def worker():  # what a pass does after its commit
        for state in ("assigned", "running", "succeeded"):
            broadcast.on_commit([(8, state, "")])
        return broadcast._sender_loop()

    async def main() -> tuple:
        channel = await layer.new_channel()
        await layer.group_add(broadcast.group_name(8), channel)
        loop = await asyncio.to_thread(worker)
        again = await asyncio.to_thread(worker)
        return loop, again, [await asyncio.wait_for(layer.receive(channel), timeout=10) for _ in range(6)]

    loop, again, got = asyncio.run(main())
    assert loop is again and loop.is_running()
    assert [t.name for t in threading.enumerate()].count("euler-broadcast") == 1
    assert [m["state"] for m in got] == ["assigned", "running", "succeeded"] * 2
