"""The gateway's end of the node tunnel: an httpx transport for `euler-node://<attempt_id>:<port>` instances.

A replica on a lender's machine opens no port. The gateway reaches it through the websocket its node agent keeps
to a web process (jobs/tunnel.py): each TCP connection that httpcore would dial becomes a stream on that tunnel,
wherever the tunnel is held. The stream's frames go through the channel layer (Redis) to the consumer whose channel
the registry names (euler/tunnels.py), and come back on this process's own channel, demultiplexed by stream id.
HTTP/1.1 itself (keep-alive, chunked bodies, SSE) is httpcore's, over these streams, so every gateway feature
(weights, health, SSE, keys, limits, usage) works on such an instance as on any other.

A refused or unanswered open is a connect error (the proxy fails over before the first byte); a tunnel that closes
under a stream is a read error.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections import OrderedDict

import httpcore
import httpx
from asgiref.sync import sync_to_async
from channels.exceptions import ChannelFull
from channels.layers import get_channel_layer

from euler import tunnels
from euler.redis import async_client
from nodeagent import protocol_tunnel as wire

log = logging.getLogger(__name__)

SCHEME = "euler-node"
OPEN_TIMEOUT = 10.0  # an open that no node answers: a connect timeout
FULL_RETRY = 0.005
STOP_WAIT = 2.0  # a cancelled reply listener: its Redis read is dropped with the loop if it does not end in time
CANCEL_EVERY = 0.1  # a stopping listener is cancelled again this often: a cancel can be consumed by the Redis read


class NoTunnel(httpcore.ConnectError):
    pass


# --- the attempt's node (an attempt never moves: cached for good, bounded) ------------------------
_nodes: OrderedDict[int, int] = OrderedDict()
NODES_CACHED = 10_000


def _node_of(attempt_id: int) -> int | None:
    from django.apps import apps
    from django.db import close_old_connections

    close_old_connections()
    attempt = apps.get_model("jobs", "Attempt")  # by label: the gateway does not import jobs
    return attempt.objects.filter(pk=attempt_id).values_list("node_id", flat=True).first()


_anode_of = sync_to_async(_node_of, thread_sensitive=False)


async def node_of(attempt_id: int) -> int | None:
    found = _nodes.get(attempt_id)
    if found is None:
        found = await _anode_of(attempt_id)
        if found is not None:
            _nodes[attempt_id] = found
            if len(_nodes) > NODES_CACHED:
                _nodes.popitem(last=False)
    return found


# --- one hub per event loop: this process's reply channel and its streams -----------------------------
class Hub:
    def __init__(self, layer) -> None:
        self.layer = layer
        self.channel: str | None = None
        self.streams: dict[str, TunnelStream] = {}
        self.task: asyncio.Task | None = None
        self.stopping = False  # set by _stop: a read that fails from now on ends the listener
        self._ready = asyncio.Lock()

    async def ready(self) -> str:
        async with self._ready:
            if self.channel is None:
                # "specific", as every consumer's: channels_redis has one receiver per process, on one list per prefix
                self.channel = await self.layer.new_channel()
                tunnels.register_local(self.channel, self._deliver)
            if self.task is None or self.task.done():
                self.task = asyncio.ensure_future(self._receive())
        return self.channel

    async def _receive(self) -> None:
        while True:
            try:
                message = await self.layer.receive(self.channel)
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - Redis went away: the streams' reads time out; listen again
                if self.stopping:
                    # Asked to stop, it did not end within STOP_WAIT, and its connections were closed under it
                    # (loop_hub): the end it was asked for, not a failure.
                    return
                log.warning("the tunnel reply channel failed; listening again", exc_info=True)
                await asyncio.sleep(0.5)
                continue
            self._deliver(message)

    def _deliver(self, message: dict) -> None:
        stream = self.streams.get(message.get("stream"))
        if stream is not None:
            stream.feed(message.get("kind"), message.get("data") or b"")

    async def send(self, channel: str, message: dict, timeout: float | None) -> None:
        """To a consumer's channel; a full channel (a node's tunnel busy) is retried until `timeout`."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            try:
                await tunnels.send(self.layer, channel, message)
                return
            except ChannelFull:
                if deadline is not None and loop.time() > deadline:
                    raise httpcore.WriteTimeout("the node's tunnel is full") from None
                await asyncio.sleep(FULL_RETRY)
            except Exception as exc:  # Redis unreachable: an error httpx maps, never a 500
                raise httpcore.WriteError(f"the channel layer failed: {type(exc).__name__}") from exc


_hubs: dict[int, Hub] = {}


def hub() -> Hub:
    key = id(asyncio.get_running_loop())
    found = _hubs.get(key)
    if found is None or (found.task is not None and found.task.get_loop().is_closed()):
        found = _hubs[key] = Hub(get_channel_layer())
    return found


# --- a stream: httpcore's network stream over the tunnel -------------------------------------------
class TunnelStream(httpcore.AsyncNetworkStream):
    def __init__(self, hub: Hub, node_channel: str) -> None:
        self.hub = hub
        self.node_channel = node_channel
        self.sid = uuid.uuid4().hex
        self.queue: asyncio.Queue = asyncio.Queue()
        self.buffer = b""
        self.eof = False
        self.closed: str | None = None  # why the node side closed it ("" for a plain close)
        self.unacked = 0
        hub.streams[self.sid] = self

    def feed(self, kind, data: bytes) -> None:
        self.queue.put_nowait((kind, data))

    async def _frame(self, kind: int, data: bytes = b"", timeout: float | None = None) -> None:
        await self.hub.send(
            self.node_channel, {"type": tunnels.FRAME, "stream": self.sid, "kind": kind, "data": data}, timeout
        )

    async def opened(self, *, attempt: int, port: int, timeout: float | None) -> None:
        channel = await self.hub.ready()
        message = {"type": tunnels.OPEN, "stream": self.sid, "reply": channel, "attempt": attempt, "port": port}
        try:
            await self.hub.send(self.node_channel, message, timeout)
            kind, data = await asyncio.wait_for(self.queue.get(), timeout or OPEN_TIMEOUT)
        except (TimeoutError, httpcore.WriteTimeout):
            await self._abandon()
            raise httpcore.ConnectTimeout(f"attempt {attempt}'s node did not open the stream in time") from None
        except httpcore.WriteError as exc:
            await self._abandon()
            raise httpcore.ConnectError(str(exc)) from exc
        except BaseException:
            await self._abandon()
            raise
        if kind != wire.OPENED:
            self._forget()
            reason = data.decode("utf-8", "replace") if kind == wire.CLOSE else "unexpected answer"
            raise httpcore.ConnectError(f"attempt {attempt}:{port} refused the stream: {reason}")

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        while not self.buffer:
            if self.eof or self.closed is not None:
                if self.closed:
                    raise httpcore.ReadError(f"the node closed the stream: {self.closed}")
                return b""
            try:
                kind, data = await asyncio.wait_for(self.queue.get(), timeout)
            except TimeoutError:
                raise httpcore.ReadTimeout("no bytes from the replica in time") from None
            if kind == wire.DATA:
                self.buffer = data
                self.unacked += 1
                if self.unacked >= wire.ACK_EVERY:
                    count, self.unacked = self.unacked, 0
                    await self._frame(wire.ACK, count.to_bytes(4, "big"), timeout)
            elif kind == wire.EOF:
                self.eof = True
            elif kind == wire.CLOSE:
                self.closed = data.decode("utf-8", "replace")
                self._forget()
        chunk, self.buffer = self.buffer[:max_bytes], self.buffer[max_bytes:]
        return chunk

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if self.closed is not None:
            raise httpcore.WriteError(f"the node closed the stream: {self.closed}")
        for start in range(0, len(buffer), wire.MAX_CHUNK):
            await self._frame(wire.DATA, bytes(buffer[start : start + wire.MAX_CHUNK]), timeout)

    async def aclose(self) -> None:
        if self.closed is None:
            self.closed = ""
            with contextlib.suppress(Exception):
                await self._frame(wire.CLOSE, b"", 1.0)
        self._forget()

    async def _abandon(self) -> None:
        self.closed = ""
        with contextlib.suppress(Exception):
            await self._frame(wire.CLOSE, b"", 1.0)
        self._forget()

    def _forget(self) -> None:
        self.hub.streams.pop(self.sid, None)

    def get_extra_info(self, info: str):
        if info == "is_readable":  # httpcore asks before reusing a kept-alive connection: gone or talking
            return self.closed is not None or self.eof or bool(self.buffer) or not self.queue.empty()
        return None


class TunnelBackend(httpcore.AsyncNetworkBackend):
    """httpcore's dialer for `euler-node` URLs: host = the attempt's id, port = the replica's port."""

    async def connect_tcp(self, host: str, port: int, timeout=None, local_address=None, socket_options=None):
        try:
            attempt = int(host)
        except ValueError:
            raise httpcore.ConnectError(f"not an attempt id: {host!r}") from None
        try:
            node = await node_of(attempt)
            channel = await tunnels.holder(async_client(), node) if node is not None else None
        except Exception as exc:  # the database or Redis did not answer: a connect error (the proxy fails over)
            raise httpcore.ConnectError(f"cannot find attempt {attempt}'s tunnel: {type(exc).__name__}") from exc
        if node is None:
            raise NoTunnel(f"attempt {attempt} has no node")
        if channel is None:
            raise NoTunnel(f"the node of attempt {attempt} holds no tunnel")
        stream = TunnelStream(hub(), channel)
        await stream.opened(attempt=attempt, port=port, timeout=timeout)
        return stream

    async def connect_unix_socket(self, path, timeout=None, socket_options=None):
        raise httpcore.ConnectError("no unix sockets through the node tunnel")

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class NodeTransport(httpx.AsyncBaseTransport):
    """Mounted for `euler-node://` on the gateway's client: HTTP/1.1 (httpcore's pool) over tunnel streams."""

    def __init__(self, limits: httpx.Limits | None = None) -> None:
        self.inner = httpx.AsyncHTTPTransport(trust_env=False, limits=limits or httpx.Limits())
        self.inner._pool._network_backend = TunnelBackend()  # httpx offers no public hook for the backend

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        request.url = request.url.copy_with(scheme="http")
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()
        await close_hub()


async def close_hub() -> None:
    """Stop this loop's hub when no stream uses it (a client closing on its loop)."""
    found = _hubs.get(id(asyncio.get_running_loop()))
    if found is None or found.streams or found.task is None:
        return
    await _stop(found)


async def _stop(found: Hub) -> None:
    _hubs.pop(id(asyncio.get_running_loop()), None)
    found.stopping = True
    for stream in list(found.streams.values()):
        stream.feed(wire.CLOSE, b"the gateway's loop is closing")
    found.streams.clear()
    if found.task is not None:
        await end_tasks([found.task], STOP_WAIT)
    if found.channel is not None:
        tunnels.unregister_local(found.channel)


async def end_tasks(tasks: list[asyncio.Task], within: float) -> None:
    """Cancel the tasks and wait for them, up to `within` seconds. One cancel is not always a task's end: under load
    the hub's reply listener was seen still waiting in a fresh BZPOPMIN two seconds after its cancel (`cancelling()`
    1, a pending read; the cancel consumed somewhere inside channels_redis's receive and redis-py's read, which then
    read again), and a second cancel ended it at once. So those still running are cancelled again every CANCEL_EVERY
    until they end."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while running := [task for task in tasks if not task.done()]:
        left = deadline - loop.time()
        if left <= 0:
            return
        for task in running:
            task.cancel()
        await asyncio.wait(running, timeout=min(CANCEL_EVERY, left))


@contextlib.asynccontextmanager
async def loop_hub():
    """For a short-lived loop (a health round): its streams' replies come through a channel layer of its own, made
    for this loop and dropped with it.

    channels_redis keeps receive state across the loops of a process: a receivers' count, and a lock per channel
    that a cancelled receive or an unfinished cleaner task leaves bound to its loop for good. Shared by rounds on
    fresh loops, one round's leftovers made every later receive in the worker fail ("bound to a different event
    loop"): no reply reached a health round again, and a service's new replicas never got ready. With a layer of
    its own, nothing a round leaves behind reaches the next. (The in-memory layer of in-process tests is shared:
    its messages live in its instance.)"""
    from channels import DEFAULT_CHANNEL_LAYER
    from channels.layers import channel_layers

    shared = get_channel_layer()
    layer = channel_layers.make_backend(DEFAULT_CHANNEL_LAYER) if hasattr(shared, "receive_clean_locks") else shared
    found = _hubs[id(asyncio.get_running_loop())] = Hub(layer)
    try:
        yield found
    finally:
        await _stop(found)
        if layer is not shared:  # its cleaners ended and its connections closed here, not by the loop's close
            with contextlib.suppress(Exception):
                await asyncio.wait_for(layer.close_pools(), STOP_WAIT)


def mounts(limits: httpx.Limits | None = None) -> dict[str, httpx.AsyncBaseTransport]:
    return {f"{SCHEME}://": NodeTransport(limits)}


def node_client(**kwargs) -> httpx.AsyncClient:
    """A client for `euler-node://` URLs alone (health checks, readiness probes), in any process with the layer."""
    return httpx.AsyncClient(transport=NodeTransport(kwargs.pop("limits", None)), trust_env=False, **kwargs)
