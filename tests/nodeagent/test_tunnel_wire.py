"""The node tunnel's wire format (nodeagent/protocol_tunnel.py) and URL (nodeagent/tunnel.py): pure."""

from __future__ import annotations

import pytest

from nodeagent import protocol_tunnel as wire
from nodeagent.tunnel import tunnel_url


def test_a_frame_round_trips_kind_stream_and_payload():
    assert wire.decode(wire.encode(wire.DATA, 7, b"abc")) == (wire.DATA, 7, b"abc")
    assert wire.decode(wire.encode(wire.EOF, wire.MAX_STREAM_ID)) == (wire.EOF, wire.MAX_STREAM_ID, b"")


def test_open_carries_the_attempt_and_port():
    kind, stream, payload = wire.decode(wire.open_frame(3, attempt=4711, port=8080))
    assert (kind, stream, wire.parse_open(payload)) == (wire.OPEN, 3, (4711, 8080))


@pytest.mark.parametrize(
    "payload",
    [b"", b"{}", b"[]", b'{"attempt": "1", "port": 80}', b'{"attempt": 1, "port": 0}', b'{"attempt": 1, "port": 70000}',
     b'{"attempt": 0, "port": 80}', b'{"attempt": true, "port": 80}', b"\xff"],
)  # fmt: skip
def test_a_bad_open_payload_is_refused(payload):
    with pytest.raises(wire.BadFrame):
        wire.parse_open(payload)


@pytest.mark.parametrize("frame", [b"", b"\x03\x00\x00", b"\x09\x00\x00\x00\x01", "text"])
def test_short_unknown_or_text_frames_are_refused(frame):
    with pytest.raises(wire.BadFrame):
        wire.decode(frame)


def test_a_data_frame_over_the_chunk_size_is_refused():
    with pytest.raises(wire.BadFrame):
        wire.decode(wire.encode(wire.DATA, 1, b"x" * (wire.MAX_CHUNK + 1)))


def test_ack_and_close_payloads():
    assert wire.parse_ack(wire.decode(wire.ack_frame(1, 8))[2]) == 8
    assert wire.decode(wire.close_frame(1, "é" * 1000))[2].decode("utf-8", "replace").startswith("é")
    with pytest.raises(wire.BadFrame):
        wire.parse_ack(b"\x00")


def test_the_tunnel_url_follows_the_control_plane_scheme():
    assert tunnel_url("https://euler.example.com") == "wss://euler.example.com/node-api/v1/tunnel"
    assert tunnel_url("http://127.0.0.1:8000/") == "ws://127.0.0.1:8000/node-api/v1/tunnel"
    assert tunnel_url("https://example.com/euler") == "wss://example.com/euler/node-api/v1/tunnel"
