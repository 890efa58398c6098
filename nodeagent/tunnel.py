"""The node tunnel's agent end: one websocket to the control plane, over which the gateway reaches this node's
replicas. The node opens no inbound port; a replica's container publishes none either.

The agent dials `/node-api/v1/tunnel` (wss:// in deployment, the node credential in the handshake, the same CA
rule as every node call), keeps it open with pings, and reconnects with capped, jittered backoff. On OPEN for an
attempt it runs, it makes a socket inside that container's network namespace (nodeagent/netns.py) and connects it
to 127.0.0.1:<port>; then it relays bytes both ways (nodeagent/protocol_tunnel.py is the wire format), with at most
WINDOW unacknowledged DATA frames per stream towards the server. An attempt this agent does not run, or a port
nothing listens on, answers CLOSE with the reason. The server opens streams only for attempts that jobs.fencing
says this node may serve, and re-checks everything; the agent checks what it knows (its own attempts) too.

It runs its own asyncio loop in one thread; `close()` (from the daemon's stop) ends it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
import threading
from collections.abc import Callable

from nodeagent import protocol_tunnel as wire
from nodeagent.backoff import Backoff
from nodeagent.client import API_PREFIX

log = logging.getLogger("euler.nodeagent.tunnel")

CONNECT_TIMEOUT = 5.0  # to the replica's port
PING_SECONDS = 20.0

SocketFor = Callable[[int], "socket.socket | None"]  # attempt id -> a socket in its container's namespace (netns.py)


def tunnel_url(base_url: str) -> str:
    """The websocket URL of the tunnel for a control plane URL (http→ws, https→wss)."""
    scheme, rest = base_url.split("://", 1)
    return f"{'wss' if scheme == 'https' else 'ws'}://{rest.rstrip('/')}{API_PREFIX}{wire.PATH_TUNNEL}"


class Stream:
    def __init__(self, tunnel: Tunnel, ws, sid: int) -> None:
        self.tunnel = tunnel
        self.ws = ws
        self.sid = sid
        self.writer: asyncio.StreamWriter | None = None
        self.credit = wire.WINDOW
        self.more = asyncio.Event()
        self.task: asyncio.Task | None = None
        self.pending: list[tuple[int, bytes]] = []  # frames from the server before the connection is up
        self.done = False

    async def run(self, payload: bytes) -> None:
        try:
            await self._run(payload)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - the tunnel went away under the stream (it is being torn down)
            self.finish()

    async def _run(self, payload: bytes) -> None:
        try:
            attempt, port = wire.parse_open(payload)
        except wire.BadFrame:
            await self._close("bad open")
            return
        try:
            reader = await self._connect(attempt, port)
        except Exception as exc:  # noqa: BLE001 - any failure refuses the stream, saying why
            await self._close(f"cannot reach attempt {attempt} port {port}: {exc}"[: wire.MAX_REASON])
            return
        await self.ws.send(wire.encode(wire.OPENED, self.sid))
        for kind, data in self.pending:
            self.on_frame(kind, data)
        self.pending.clear()
        try:
            while True:
                chunk = await reader.read(wire.MAX_CHUNK)
                if not chunk:
                    if not self.done:
                        await self.ws.send(wire.encode(wire.EOF, self.sid))
                    break
                while self.credit <= 0 and not self.done:
                    self.more.clear()
                    await self.more.wait()
                if self.done:
                    break
                self.credit -= 1
                await self.ws.send(wire.encode(wire.DATA, self.sid, chunk))
        except (OSError, asyncio.IncompleteReadError) as exc:
            await self._close(f"the replica's connection failed: {exc}"[: wire.MAX_REASON])
            return
        # the replica ended its side; the stream lives on until the server closes it (or the tunnel goes)

    async def _connect(self, attempt: int, port: int) -> asyncio.StreamReader:
        loop = asyncio.get_running_loop()
        sock = await loop.run_in_executor(None, self.tunnel.socket_for, attempt)
        if sock is None:
            raise LookupError("this node runs no such attempt")
        try:
            await asyncio.wait_for(loop.sock_connect(sock, ("127.0.0.1", port)), CONNECT_TIMEOUT)
            reader, self.writer = await asyncio.open_connection(sock=sock, limit=wire.MAX_CHUNK * 2)
        except BaseException:
            sock.close()
            raise
        return reader

    def on_frame(self, kind: int, data: bytes) -> None:
        if self.writer is None:
            self.pending.append((kind, data))
            return
        if kind == wire.DATA:
            self.writer.write(data)
        elif kind == wire.EOF:
            if self.writer.can_write_eof():
                self.writer.write_eof()
        elif kind == wire.ACK:
            try:
                self.credit += wire.parse_ack(data)
            except wire.BadFrame:
                return
            self.more.set()
        elif kind == wire.CLOSE:
            self.finish()

    async def _close(self, reason: str) -> None:
        self.finish()
        with contextlib.suppress(Exception):
            await self.ws.send(wire.close_frame(self.sid, reason))

    def finish(self) -> None:
        self.done = True
        self.more.set()
        self.tunnel.streams.pop(self.sid, None)
        if self.writer is not None:
            self.writer.close()
        if self.task is not None and self.task is not asyncio.current_task():
            self.task.cancel()


class Tunnel:
    def __init__(
        self,
        *,
        base_url: str,
        credential: Callable[[], str | None],
        socket_for: SocketFor,
        tls: ssl.SSLContext | bool = True,
    ) -> None:
        self.url = tunnel_url(base_url)
        self.credential = credential
        self.socket_for = socket_for
        self.tls = tls
        self.streams: dict[int, Stream] = {}
        self.connected = threading.Event()  # tests and logs: the server accepted the websocket
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="tunnel", daemon=True)
        self._thread.start()

    def close(self, timeout: float = 5.0) -> None:
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(stop.set)
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except Exception:  # noqa: BLE001 - the tunnel must not take the agent down
            log.exception("the node tunnel stopped")

    def _ssl(self):
        if not self.url.startswith("wss://"):
            return None
        return self.tls if isinstance(self.tls, ssl.SSLContext) else ssl.create_default_context()

    async def _main(self) -> None:
        from websockets.asyncio.client import connect
        from websockets.exceptions import InvalidStatus

        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        backoff = Backoff(base=1.0, cap=30.0)
        while not self._stop.is_set():
            credential = self.credential()
            try:
                async with connect(
                    self.url,
                    additional_headers={"Authorization": f"Bearer {credential}"} if credential else {},
                    ssl=self._ssl(),
                    open_timeout=10,
                    ping_interval=PING_SECONDS,
                    ping_timeout=PING_SECONDS,
                    max_size=wire.MAX_CHUNK + 1024,
                    compression=None,
                    proxy=None,
                ) as ws:
                    backoff.reset()
                    self.connected.set()
                    log.info("node tunnel open (%s)", self.url)
                    await self._serve(ws)
            except InvalidStatus as exc:
                log.warning("the control plane refused the node tunnel: %s", exc)
            except Exception as exc:  # noqa: BLE001 - reconnect whatever broke
                if self.connected.is_set():
                    log.info("node tunnel closed (%s); reconnecting", exc)
                else:
                    log.debug("node tunnel not open (%s); retrying", exc)
            finally:
                self.connected.clear()
                for stream in list(self.streams.values()):
                    stream.finish()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), backoff.next_delay())

    async def _serve(self, ws) -> None:
        stopper = asyncio.ensure_future(self._stop.wait())
        try:
            while True:
                receiving = asyncio.ensure_future(ws.recv())
                done, _ = await asyncio.wait({receiving, stopper}, return_when=asyncio.FIRST_COMPLETED)
                if stopper in done:
                    receiving.cancel()
                    return
                self._on_message(ws, receiving.result())
        finally:
            stopper.cancel()

    def _on_message(self, ws, message) -> None:
        if not isinstance(message, bytes):
            return
        try:
            kind, sid, payload = wire.decode(message)
        except wire.BadFrame:
            return
        if kind == wire.OPEN:
            if sid in self.streams:
                return
            stream = self.streams[sid] = Stream(self, ws, sid)
            stream.task = asyncio.ensure_future(stream.run(payload))
            return
        stream = self.streams.get(sid)
        if stream is not None:
            stream.on_frame(kind, payload)
