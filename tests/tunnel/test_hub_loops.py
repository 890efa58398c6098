"""A health round runs on a fresh event loop each time (agents.health._run_round). channels_redis keeps receive
state across a process's loops (a receivers' count, a lock per channel that a cancelled receive or an unfinished
cleaner leaves bound to its loop): shared by the rounds, one round's leftovers made every later receive in the
worker fail, so the probes of a service's new replicas never heard an answer and the replicas never got ready.
Each round's replies now come through a layer of its own (gateway.tunnel.loop_hub)."""

from __future__ import annotations

import asyncio
import contextlib
import gc

import pytest
from channels.layers import get_channel_layer

from agents import health
from euler import tunnels
from gateway import tunnel
from nodeagent import protocol_tunnel as wire


@pytest.fixture(autouse=True)
def redis_layer(settings):
    """The real layer (channels_redis, on this worker's Redis), as in a worker: the lock-out is its rule."""
    import config.settings as shipped

    settings.CHANNEL_LAYERS = shipped.CHANNEL_LAYERS
    assert type(get_channel_layer()).__name__ == "RedisChannelLayer"


hubs: list[tunnel.Hub] = []


def _round(leave_a_stream: bool) -> bytes:
    """One round on its own loop, closed as a health round closes it: a reply sent through Redis to the hub's
    channel reaches a stream."""

    async def go() -> bytes:
        async with tunnel.loop_hub() as hub:
            return await through(hub)

    async def through(hub) -> bytes:
        hubs.append(hub)
        channel = await hub.ready()
        stream = tunnel.TunnelStream(hub, "specific.nobody!x")
        await get_channel_layer().send(
            channel, {"type": tunnels.REPLY, "stream": stream.sid, "kind": wire.DATA, "data": b"answer"}
        )
        kind, data = await asyncio.wait_for(stream.queue.get(), 10)
        assert kind == wire.DATA
        if not leave_a_stream:
            stream._forget()
        return data

    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(go())
    finally:
        health.close_loop(loop)


def test_a_round_that_leaves_a_stream_in_its_hub_does_not_lock_the_next_rounds_out_of_the_channel_layer(caplog):
    assert _round(leave_a_stream=True) == b"answer"  # a probe cut short: its stream is still in the hub
    for _ in range(3):
        assert _round(leave_a_stream=False) == b"answer"
    assert not set(map(id, hubs)) & set(map(id, tunnel._hubs.values()))  # nothing kept for a closed loop
    layers = {id(h.layer) for h in hubs}
    assert len(layers) == len(hubs) and id(get_channel_layer()) not in layers  # a layer per round, none shared
    failed = [r.getMessage() for r in caplog.records if r.name == "gateway.tunnel"]
    assert not failed  # no receive failed on a later loop ("bound to a different event loop", "Two event loops")
    gc.collect()  # a task left on a closed loop (channels_redis's cleaner) would be reported now
    assert not [r.getMessage() for r in caplog.records if r.name == "asyncio"]


def test_a_closing_round_ends_the_tasks_left_on_its_loop_and_retrieves_their_errors(caplog):
    loop = asyncio.new_event_loop()

    async def fails_late():
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            raise ConnectionError("the cleaner's connection went with the loop") from None

    async def starts_one():
        return loop.create_task(fails_late())

    left = loop.run_until_complete(starts_one())
    health.close_loop(loop)
    assert left.done() and loop.is_closed()
    del left
    gc.collect()
    assert not [r.getMessage() for r in caplog.records if r.name == "asyncio"]  # no "never retrieved"


def test_a_closing_round_cancels_again_a_task_that_consumed_its_cancel(monkeypatch):
    """close_loop ends what is left on a round's loop as _stop ends the listener: a task that swallows its first
    cancel (as the Redis read did) is cancelled again, long before CLOSE_WAIT, and not left pending on a closed loop."""
    monkeypatch.setattr(health, "CLOSE_WAIT", 60.0)
    monkeypatch.setattr(tunnel, "CANCEL_EVERY", 0.01)
    loop = asyncio.new_event_loop()

    async def reads_again():
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(3600)
        await asyncio.sleep(3600)

    async def starts_one():
        return loop.create_task(reads_again())

    left = loop.run_until_complete(starts_one())
    loop.run_until_complete(asyncio.sleep(0.01))  # it is in its first sleep
    assert not left.done()
    health.close_loop(loop)
    assert left.cancelled() and loop.is_closed()


def test_a_listener_that_outlives_its_stop_ends_quietly_when_its_connections_close(monkeypatch, caplog):
    """_stop cancels the hub's reply listener and waits STOP_WAIT; a read that does not end in time (Redis slow to
    answer the cancel) has its connections closed under it by loop_hub. That failed read is the end the listener was
    asked for: it returns, instead of logging "the tunnel reply channel failed" and reading again from a layer whose
    pools are gone (locally, about 1 run in 5 of `pytest tests/tunnel/ --count 20 -n 4` before this change)."""
    monkeypatch.setattr(tunnel, "STOP_WAIT", 0.05)

    class SlowToStop:
        """A layer whose read answers a cancel only when its connection is closed."""

        def __init__(self) -> None:
            self.closed = asyncio.Event()
            self.reads = 0

        async def new_channel(self) -> str:
            return "specific.slow!hub"

        async def receive(self, channel: str) -> dict:
            self.reads += 1
            while not self.closed.is_set():
                with contextlib.suppress(asyncio.CancelledError):  # every cancel, until the connection goes
                    await self.closed.wait()
            raise ConnectionError("Connection closed by server.")

    async def go(layer: SlowToStop) -> asyncio.Task:
        hub = tunnel.Hub(layer)
        await hub.ready()
        await asyncio.sleep(0.01)  # the listener is reading
        await tunnel._stop(hub)
        assert not hub.task.done()  # still in its read after STOP_WAIT
        layer.closed.set()  # loop_hub closes the layer's pools
        await asyncio.wait([hub.task], timeout=2)
        return hub.task

    layer = SlowToStop()
    loop = asyncio.new_event_loop()
    try:
        task = loop.run_until_complete(go(layer))
    finally:
        health.close_loop(loop)
    assert task.done() and layer.reads == 1  # ended; never read again
    assert not [r.getMessage() for r in caplog.records if r.name == "gateway.tunnel"]


def test_a_listener_whose_read_consumes_its_cancel_is_cancelled_again_and_ends(monkeypatch, caplog):
    """Seen under load: the reply listener still waiting in a fresh BZPOPMIN two seconds after its cancel
    (`cancelling()` 1, its read pending): the cancel was consumed inside the Redis read, which read again. _stop
    cancels it again until it ends, so it ends long before STOP_WAIT and nothing is closed under a live read."""
    monkeypatch.setattr(tunnel, "STOP_WAIT", 60.0)
    monkeypatch.setattr(tunnel, "CANCEL_EVERY", 0.01)

    class ReadsAgain:
        """A layer whose read swallows the first cancel and reads again, as the Redis client did."""

        def __init__(self) -> None:
            self.reads = 0

        async def new_channel(self) -> str:
            return "specific.again!hub"

        async def receive(self, channel: str) -> dict:
            self.reads += 1
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                if self.reads > 1:
                    raise
            return await self.receive(channel)

    async def go(layer: ReadsAgain) -> tuple[asyncio.Task, bool]:
        hub = tunnel.Hub(layer)
        await hub.ready()
        await asyncio.sleep(0.01)  # the listener is reading
        stop = asyncio.ensure_future(tunnel._stop(hub))
        await asyncio.wait([stop], timeout=30)  # far below STOP_WAIT: it ends because it is cancelled again
        return hub.task, stop.done()

    layer = ReadsAgain()
    loop = asyncio.new_event_loop()
    try:
        task, stopped = loop.run_until_complete(go(layer))
    finally:
        health.close_loop(loop)
    assert stopped and task.cancelled() and layer.reads == 2
    assert not [r.getMessage() for r in caplog.records if r.name == "gateway.tunnel"]
