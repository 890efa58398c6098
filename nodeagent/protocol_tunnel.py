"""The node tunnel's wire format (pure; both sides import it through nodeagent.protocol).

The agent keeps one websocket to the control plane (`PATH_TUNNEL`, the node credential, HTTPS in deployment). The
server multiplexes byte streams over it: each stream is one TCP connection that the agent makes to a port of one of
its attempts' containers, from inside that container's network namespace. Every websocket message is one binary
frame: a 1-byte kind, a 4-byte stream id (big-endian, chosen by the server), the payload.

- OPEN (server → agent): payload JSON `{"attempt": id, "port": p}`; the agent answers OPENED or CLOSE.
- DATA (both ways): bytes of the stream, at most MAX_CHUNK each.
- EOF (both ways): the sender will send no more DATA (the other direction stays open).
- CLOSE (both ways): the stream is gone; payload: why, UTF-8 (empty on a plain close).
- ACK (server → agent): payload: 4-byte count of DATA frames the server has passed on since the last ACK. The
  agent has at most WINDOW unacknowledged DATA frames in flight per stream, so a slow reader holds at most
  WINDOW × MAX_CHUNK bytes per stream in the server, and a fast replica cannot flood a slow caller.
"""

from __future__ import annotations

import json
import struct

PATH_TUNNEL = "tunnel"  # under /node-api/v1/, a websocket

OPEN = 1
OPENED = 2
DATA = 3
EOF = 4
CLOSE = 5
ACK = 6
KINDS = frozenset({OPEN, OPENED, DATA, EOF, CLOSE, ACK})

MAX_CHUNK = 64 * 1024
WINDOW = 32  # DATA frames in flight per stream, agent → server
ACK_EVERY = 8  # the server acknowledges after passing on this many
MAX_STREAM_ID = 2**32 - 1
MAX_REASON = 300

_HEAD = struct.Struct(">BI")


class BadFrame(ValueError):
    """A frame that does not parse: the peer is broken or hostile; the frame is dropped."""


def encode(kind: int, stream: int, payload: bytes = b"") -> bytes:
    return _HEAD.pack(kind, stream) + payload


def decode(frame: bytes) -> tuple[int, int, bytes]:
    if not isinstance(frame, bytes | bytearray) or len(frame) < _HEAD.size:
        raise BadFrame("short frame")
    kind, stream = _HEAD.unpack_from(frame)
    if kind not in KINDS:
        raise BadFrame(f"unknown frame kind {kind}")
    payload = bytes(frame[_HEAD.size :])
    if kind == DATA and len(payload) > MAX_CHUNK:
        raise BadFrame("DATA frame over MAX_CHUNK")
    return kind, stream, payload


def open_frame(stream: int, *, attempt: int, port: int) -> bytes:
    return encode(OPEN, stream, json.dumps({"attempt": attempt, "port": port}).encode())


def parse_open(payload: bytes) -> tuple[int, int]:
    """(attempt id, port) of an OPEN payload; BadFrame if it is not one."""
    try:
        body = json.loads(payload)
        attempt, port = body["attempt"], body["port"]
    except (ValueError, KeyError, TypeError):
        raise BadFrame("bad OPEN payload") from None
    if type(attempt) is not int or type(port) is not int or attempt <= 0 or not 0 < port < 65536:
        raise BadFrame("bad OPEN payload")
    return attempt, port


def close_frame(stream: int, reason: str = "") -> bytes:
    return encode(CLOSE, stream, reason[:MAX_REASON].encode("utf-8", "replace"))


def ack_frame(stream: int, count: int) -> bytes:
    return encode(ACK, stream, struct.pack(">I", count))


def parse_ack(payload: bytes) -> int:
    if len(payload) != 4:
        raise BadFrame("bad ACK payload")
    return struct.unpack(">I", payload)[0]
