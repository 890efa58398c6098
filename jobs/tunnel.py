"""The node tunnel's server end: the websocket `/node-api/v1/tunnel` that each node agent keeps open.

The gateway (gateway/tunnel.py, in any web process) reaches a replica through it: it asks this consumer, by its
channel name in the registry (euler/tunnels.py), to open a stream to a port of one of this node's attempts. The
consumer opens it only while `jobs.fencing` gives the node the SERVE right on that attempt (on this node, current,
active), allocates the stream's id on the websocket itself, and relays frames both ways. A node names no stream
of its own: frames for an id this consumer did not open are dropped, so a node can neither answer for another
node's attempt nor inject into another stream. The node authenticates with its credential, as on every node
endpoint, and the HTTPS rule of the node endpoints applies (wss, or a client in EULER_NODE_HTTP_ALLOWED_NETWORKS).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncConsumer
from django.conf import settings

from euler import tunnels
from euler.redis import async_client
from nodeagent import protocol_tunnel as wire

log = logging.getLogger(__name__)

CLOSE_UNAUTHENTICATED = 4401
CLOSE_HTTPS_REQUIRED = 4403
REPLY_RETRIES = (0.002, 0.01, 0.05, 0.2, 0.5, 1.0)  # a full gateway channel: about 2 s, then the stream is cut
MAX_STREAMS = 1024  # open streams per node: past it an open is refused (the gateway fails over)


def _secure(scope) -> bool:
    from euler.ratelimit import scope_ip
    from nodes.auth import address_allowed

    if scope.get("scheme") == "wss":
        return True
    headers = dict(scope.get("headers") or ())
    if settings.SECURE_PROXY_SSL_HEADER and headers.get(b"x-forwarded-proto", b"").decode("latin-1") == "https":
        return True
    return address_allowed(scope_ip(scope), tuple(settings.EULER_NODE_HTTP_ALLOWED_NETWORKS))


@database_sync_to_async
def _node(scope):
    """The node behind the handshake's credential, or None (no credential, unknown, revoked, rejected)."""
    from euler.errors import EulerError
    from euler.ratelimit import scope_ip
    from nodes.auth import authenticate_node, bearer

    raw = bearer(dict(scope.get("headers") or ()).get(b"authorization", b"").decode("latin-1"))
    try:
        return authenticate_node(raw, who=scope_ip(scope))
    except EulerError:
        return None


@database_sync_to_async
def _still_valid(node) -> bool:
    from nodes.models import Node

    return Node.objects.filter(
        pk=node.pk, credential_digest=node.credential_digest, approval__in=("pending", "approved")
    ).exists()


def _refusal_now(node, attempt_id: int) -> str | None:
    """Why this node may not carry a stream to the attempt (None: it may): jobs.fencing decides."""
    from django.db import close_old_connections

    from jobs.fencing import Right, StaleAttempt, attempt_for

    close_old_connections()
    try:
        attempt_for(node=node, attempt_id=attempt_id, right=Right.SERVE)
    except StaleAttempt as exc:
        return exc.message
    return None


# Not thread-sensitive: Channels' default runs every database call of the process on one thread, and a burst of
# opens (a gateway whose callers outgrow its kept-alive connections) would queue behind each other there.
_refusal = sync_to_async(_refusal_now, thread_sensitive=False)


class NodeTunnelConsumer(AsyncConsumer):
    node = None
    keeper: asyncio.Task | None = None
    local: asyncio.Task | None = None

    async def websocket_connect(self, message):
        if not _secure(self.scope):
            await self.send({"type": "websocket.close", "code": CLOSE_HTTPS_REQUIRED})
            return
        node = await _node(self.scope)
        if node is None:
            await self.send({"type": "websocket.close", "code": CLOSE_UNAUTHENTICATED})
            return
        self.node = node
        self.streams: dict[int, tuple[str, str]] = {}  # wire id -> (gateway stream id, gateway reply channel)
        self.wire_ids: dict[str, int] = {}  # gateway stream id -> wire id
        self.next_id = 0
        self.opening: set[asyncio.Task] = set()  # opens whose check is under way
        self.closed = False
        self.redis = async_client()
        self.inbox: asyncio.Queue = asyncio.Queue()  # messages from a gateway in this process (euler.tunnels.send)
        self.local = asyncio.ensure_future(self._local_messages())
        tunnels.register_local(self.channel_name, self.inbox.put_nowait)
        await tunnels.claim(self.redis, node.pk, self.channel_name)  # first: reachable once the agent hears yes
        await self.send({"type": "websocket.accept"})
        self.keeper = asyncio.ensure_future(self._keep())
        log.info("node %s opened its tunnel", node.name)

    async def _keep(self) -> None:
        """Refresh the registry entry; close once the node's credential is rotated, revoked or rejected."""
        while True:
            await asyncio.sleep(tunnels.REFRESH_SECONDS)
            try:
                if not await _still_valid(self.node):
                    await self.send({"type": "websocket.close", "code": CLOSE_UNAUTHENTICATED})
                    return
                await tunnels.claim(self.redis, self.node.pk, self.channel_name)
            except Exception:  # noqa: BLE001 - a database or Redis hiccup: the entry's TTL outlasts the next try
                log.warning("refreshing the tunnel of node %s failed", self.node.name, exc_info=True)

    async def _local_messages(self) -> None:
        """The same handlers as for the channel layer's messages, one at a time, in order."""
        while True:
            message = await self.inbox.get()
            try:
                if message.get("type") == tunnels.OPEN:
                    await self.tunnel_open(message)
                elif message.get("type") == tunnels.FRAME:
                    await self.tunnel_frame(message)
            except Exception:  # noqa: BLE001 - one message's failure (the socket closing) must not stop the rest
                log.warning("node %s: a tunnel message failed", self.node.name, exc_info=True)

    async def websocket_disconnect(self, message):
        self.closed = True
        if self.local is not None:
            tunnels.unregister_local(self.channel_name)
            self.local.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.local
        if self.keeper is not None:
            self.keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.keeper
        if self.node is not None:
            with contextlib.suppress(Exception):
                await tunnels.release(self.redis, self.node.pk, self.channel_name)
            for sid, reply in list(self.streams.values()):
                await self._reply(reply, sid, wire.CLOSE, b"the node's tunnel closed")
            self.streams.clear()
            self.wire_ids.clear()
        from channels.exceptions import StopConsumer

        raise StopConsumer()

    async def _reply(self, reply: str, sid: str, kind: int, data: bytes = b"") -> bool:
        """Pass a frame on to the gateway's channel; a full channel is retried for a while, then the stream is cut
        (the node told CLOSE; the gateway's read ends at its timeout): a frame is never skipped inside a stream."""
        from channels.exceptions import ChannelFull

        message = {"type": tunnels.REPLY, "stream": sid, "kind": kind, "data": data}
        for delay in REPLY_RETRIES:
            try:
                await tunnels.send(self.channel_layer, reply, message)
                return True
            except ChannelFull:
                await asyncio.sleep(delay)
            except Exception:  # noqa: BLE001 - Redis unreachable: the same as a full channel, without waiting
                break
        log.warning("node %s: the gateway's channel %s took no frame; the stream is cut", self.node.name, reply)
        wire_id = self.wire_ids.get(sid)
        if wire_id is not None:
            self._forget(wire_id)
            await self.send(
                {"type": "websocket.send", "bytes": wire.close_frame(wire_id, "the gateway is not reading")}
            )
        return False

    def _forget(self, wire_id: int) -> None:
        found = self.streams.pop(wire_id, None)
        if found is not None:
            self.wire_ids.pop(found[0], None)

    # --- from the gateway ---------------------------------------------------------------------------
    async def tunnel_open(self, message):
        sid, reply = str(message.get("stream", "")), str(message.get("reply", ""))
        attempt, port = message.get("attempt"), message.get("port")
        if self.node is None or not sid or not reply:
            return
        if type(attempt) is not int or type(port) is not int or not 0 < port < 65536:
            await self._reply(reply, sid, wire.CLOSE, b"bad open")
            return
        if len(self.streams) + len(self.opening) >= MAX_STREAMS:
            await self._reply(reply, sid, wire.CLOSE, b"too many streams on this node's tunnel")
            return
        # Checked beside the other messages, not before them: one open's database round trip holds no other stream.
        task = asyncio.ensure_future(self._open(sid, reply, attempt, port))
        self.opening.add(task)
        task.add_done_callback(self.opening.discard)

    async def _open(self, sid: str, reply: str, attempt: int, port: int) -> None:
        try:
            why = await _refusal(self.node, attempt)
        except Exception:  # noqa: BLE001 - the database did not answer: refuse this open, keep the tunnel
            log.warning("checking node %s's right to attempt %s failed", self.node.name, attempt, exc_info=True)
            why = "the control plane could not check this attempt; try again"
        if why is not None:
            await self._reply(reply, sid, wire.CLOSE, why.encode())
            return
        if self.node is None or self.closed:
            await self._reply(reply, sid, wire.CLOSE, b"the node's tunnel closed")
            return
        self.next_id = self.next_id % wire.MAX_STREAM_ID + 1
        while self.next_id in self.streams:
            self.next_id = self.next_id % wire.MAX_STREAM_ID + 1
        wire_id = self.next_id
        self.streams[wire_id] = (sid, reply)
        self.wire_ids[sid] = wire_id
        await self.send({"type": "websocket.send", "bytes": wire.open_frame(wire_id, attempt=attempt, port=port)})

    async def tunnel_frame(self, message):
        sid, kind, data = str(message.get("stream", "")), message.get("kind"), message.get("data") or b""
        wire_id = self.wire_ids.get(sid)
        if wire_id is None or kind not in (wire.DATA, wire.EOF, wire.CLOSE, wire.ACK):
            return
        if kind == wire.CLOSE:
            self._forget(wire_id)
        await self.send({"type": "websocket.send", "bytes": wire.encode(kind, wire_id, bytes(data))})

    # --- from the node --------------------------------------------------------------------------------
    async def websocket_receive(self, message):
        frame = message.get("bytes")
        if frame is None or self.node is None:
            return
        try:
            kind, wire_id, payload = wire.decode(frame)
        except wire.BadFrame:
            return
        found = self.streams.get(wire_id)
        if found is None or kind not in (wire.OPENED, wire.DATA, wire.EOF, wire.CLOSE):
            return  # not a stream this consumer opened, or a kind only the server sends: dropped
        if kind == wire.CLOSE:
            self._forget(wire_id)
        await self._reply(found[1], found[0], kind, payload)
