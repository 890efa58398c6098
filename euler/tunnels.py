"""Where each node's tunnel is held: the Redis registry that the web processes share (ground floor).

A node agent keeps one websocket (jobs/tunnel.py, the consumer) to whichever web process its connection landed
on. That consumer writes `euler:tunnel:node:<node id>` = its Channels channel name, with a TTL that it refreshes
while the socket lives. A gateway stream (gateway/tunnel.py), in any web process or worker, reads the key and
sends its frames to that channel through the channel layer (Redis); the consumer answers on the gateway's own
channel. Neither side imports the other: both name the messages below.

When both ends are in the same process (the gateway call landed on the process that holds the tunnel), `send`
hands the message over in memory instead of through Redis: the same messages, in the same order.

Messages (channel layer, msgpack):
- gateway → consumer: `{"type": "tunnel.open", "stream": sid, "reply": channel, "attempt": id, "port": p}` and
  `{"type": "tunnel.frame", "stream": sid, "kind": k, "data": bytes}` (k: DATA, EOF, CLOSE, ACK of
  nodeagent.protocol_tunnel).
- consumer → gateway: `{"type": "tunnel.reply", "stream": sid, "kind": k, "data": bytes}` (k: OPENED, DATA, EOF,
  CLOSE).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

KEY = "euler:tunnel:node:{node_id}"
TTL_SECONDS = 90
REFRESH_SECONDS = 30

OPEN = "tunnel.open"
FRAME = "tunnel.frame"
REPLY = "tunnel.reply"

# Delete the key only while it still names this consumer (a reconnect to another process may have replaced it).
RELEASE_SCRIPT = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"


def key(node_id: int) -> str:
    return KEY.format(node_id=node_id)


async def claim(redis, node_id: int, channel: str) -> None:
    await redis.set(key(node_id), channel, ex=TTL_SECONDS)


async def release(redis, node_id: int, channel: str) -> None:
    await redis.eval(RELEASE_SCRIPT, 1, key(node_id), channel)


async def holder(redis, node_id: int) -> str | None:
    found = await redis.get(key(node_id))
    return found.decode() if isinstance(found, bytes) else found


# --- the same process: no Redis in between ------------------------------------------------------------
_local: dict[str, tuple[asyncio.AbstractEventLoop, Callable[[dict], None]]] = {}


def register_local(channel: str, deliver: Callable[[dict], None]) -> None:
    """`deliver(message)` takes messages for `channel` sent from this process's running loop (it must not block)."""
    _local[channel] = (asyncio.get_running_loop(), deliver)


def unregister_local(channel: str) -> None:
    _local.pop(channel, None)


async def send(layer, channel: str, message: dict) -> None:
    """To `channel`: in memory when its receiver lives on this loop, else through the channel layer (which may
    raise ChannelFull)."""
    found = _local.get(channel)
    if found is not None and found[0] is asyncio.get_running_loop():
        found[1](message)
        return
    await layer.send(channel, message)
