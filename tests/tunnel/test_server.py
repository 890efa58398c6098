"""The node tunnel's server end (jobs/tunnel.py) and the gateway's (gateway/tunnel.py), in one process.

The websocket is the consumer behind config.asgi's router; the node side is played by the test, frame by frame.
"""

from __future__ import annotations

import asyncio

import httpcore
import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator

from config.asgi import application
from euler import tunnels
from euler.redis import async_client
from gateway.tunnel import TunnelBackend
from nodeagent import protocol_tunnel as wire

pytestmark = pytest.mark.django_db(transaction=True)

PATH = "/node-api/v1/tunnel"


@pytest.fixture(autouse=True, params=["in memory", "channel layer"])
def route(request, monkeypatch):
    """Both ends in this process hand messages over in memory (euler.tunnels.send); across processes they go
    through the channel layer: run every test both ways."""
    if request.param == "channel layer":
        monkeypatch.setattr(tunnels, "register_local", lambda channel, deliver: None)
    return request.param


def socket(credential: str | None, *, client=("127.0.0.1", 50000)) -> WebsocketCommunicator:
    headers = [(b"host", b"localhost")]
    if credential:
        headers.append((b"authorization", f"Bearer {credential}".encode()))
    ws = WebsocketCommunicator(application, PATH, headers=headers)
    ws.scope["client"] = client
    return ws


async def connected(node, credential) -> WebsocketCommunicator:
    ws = socket(credential)
    ok, _ = await ws.connect(timeout=10)
    assert ok
    assert await tunnels.holder(async_client(), node.pk)  # registered once accepted
    return ws


async def frame_from(ws) -> tuple[int, int, bytes]:
    return wire.decode(await ws.receive_from(timeout=10))


async def open_stream(ws, attempt, port=8080):
    """The gateway opens a stream; the node (the test) sees OPEN and answers OPENED."""
    opening = asyncio.ensure_future(TunnelBackend().connect_tcp(str(attempt.pk), port, timeout=10))
    kind, sid, payload = await frame_from(ws)
    assert (kind, wire.parse_open(payload)) == (wire.OPEN, (attempt.pk, port))
    await ws.send_to(bytes_data=wire.encode(wire.OPENED, sid))
    return await opening, sid


async def test_a_stream_carries_bytes_both_ways_to_the_attempt_on_its_node(enrolled, attempt_on, project):
    node, credential = await sync_to_async(enrolled)()
    attempt = await sync_to_async(attempt_on)(project, node)
    ws = await connected(node, credential)
    stream, sid = await open_stream(ws, attempt)

    await stream.write(b"GET / HTTP/1.1\r\n\r\n")
    assert await frame_from(ws) == (wire.DATA, sid, b"GET / HTTP/1.1\r\n\r\n")
    for i in range(wire.ACK_EVERY):
        await ws.send_to(bytes_data=wire.encode(wire.DATA, sid, f"part {i};".encode()))
    got = b"".join([await stream.read(1024, timeout=10) for _ in range(wire.ACK_EVERY)])
    assert got == b"".join(f"part {i};".encode() for i in range(wire.ACK_EVERY))
    kind, ack_sid, payload = await frame_from(ws)  # the gateway acknowledges what it passed on: the window moves
    assert (kind, ack_sid, wire.parse_ack(payload)) == (wire.ACK, sid, wire.ACK_EVERY)
    await ws.send_to(bytes_data=wire.encode(wire.EOF, sid))
    assert await stream.read(1024, timeout=10) == b""

    await stream.aclose()
    assert await frame_from(ws) == (wire.CLOSE, sid, b"")
    await ws.disconnect()
    assert await tunnels.holder(async_client(), node.pk) is None  # released on disconnect


async def test_a_node_cannot_open_a_stream_to_another_nodes_attempt(enrolled, attempt_on, project):
    """Even if the registry pointed node A's attempts at node B's tunnel, B's consumer refuses (jobs.fencing)."""
    (node_a, _), (node_b, cred_b) = await sync_to_async(enrolled)(), await sync_to_async(enrolled)()
    attempt_a = await sync_to_async(attempt_on)(project, node_a)
    ws_b = await connected(node_b, cred_b)
    await tunnels.claim(async_client(), node_a.pk, await tunnels.holder(async_client(), node_b.pk))

    with pytest.raises(httpcore.ConnectError, match="no longer current"):
        await TunnelBackend().connect_tcp(str(attempt_a.pk), 8080, timeout=10)
    assert await ws_b.receive_nothing(timeout=0.2)  # B never heard of it
    await ws_b.disconnect()


async def test_frames_a_node_sends_for_streams_it_was_not_given_go_nowhere(enrolled, attempt_on, project):
    (node_a, cred_a), (_, cred_b) = await sync_to_async(enrolled)(), await sync_to_async(enrolled)()
    attempt_a = await sync_to_async(attempt_on)(project, node_a)
    ws_a = await connected(node_a, cred_a)
    stream, sid = await open_stream(ws_a, attempt_a)

    ws_b = socket(cred_b)
    assert (await ws_b.connect(timeout=10))[0]
    for kind in (wire.OPENED, wire.DATA, wire.EOF, wire.CLOSE):
        await ws_b.send_to(bytes_data=wire.encode(kind, sid, b"forged"))  # A's stream id, on B's socket
    await ws_b.send_to(bytes_data=b"\x01")  # and garbage
    await ws_b.send_to(text_data="hello")
    await ws_a.send_to(bytes_data=wire.encode(wire.DATA, sid, b"genuine"))
    assert await stream.read(1024, timeout=10) == b"genuine"  # only A's own bytes, nothing of B's
    assert not stream.get_extra_info("is_readable")
    await stream.aclose()
    await ws_a.disconnect()
    await ws_b.disconnect()


@pytest.mark.parametrize("state", ["succeeded", "lost", "cancelled"])
async def test_an_ended_attempt_takes_no_new_stream(enrolled, attempt_on, project, state):
    node, credential = await sync_to_async(enrolled)()
    attempt = await sync_to_async(attempt_on)(project, node, state=state)
    ws = await connected(node, credential)
    with pytest.raises(httpcore.ConnectError, match="ended"):
        await TunnelBackend().connect_tcp(str(attempt.pk), 8080, timeout=10)
    assert await ws.receive_nothing(timeout=0.2)
    await ws.disconnect()


async def test_a_node_that_answers_close_refuses_the_connect_with_its_reason(enrolled, attempt_on, project):
    node, credential = await sync_to_async(enrolled)()
    attempt = await sync_to_async(attempt_on)(project, node)
    ws = await connected(node, credential)
    opening = asyncio.ensure_future(TunnelBackend().connect_tcp(str(attempt.pk), 8080, timeout=10))
    _, sid, _ = await frame_from(ws)
    await ws.send_to(bytes_data=wire.close_frame(sid, "nothing listens on 8080"))
    with pytest.raises(httpcore.ConnectError, match="nothing listens on 8080"):
        await opening
    await ws.disconnect()


async def test_a_gone_tunnel_breaks_its_open_streams_and_later_connects_fail(enrolled, attempt_on, project):
    node, credential = await sync_to_async(enrolled)()
    attempt = await sync_to_async(attempt_on)(project, node)
    ws = await connected(node, credential)
    stream, _ = await open_stream(ws, attempt)
    await ws.disconnect()
    with pytest.raises(httpcore.ReadError, match="tunnel closed"):
        await stream.read(1024, timeout=10)
    with pytest.raises(httpcore.ConnectError, match="holds no tunnel"):
        await TunnelBackend().connect_tcp(str(attempt.pk), 8080, timeout=10)


@pytest.mark.parametrize("credential", [None, "euler_node_notavalidone", "Basic abc"])
async def test_a_handshake_without_a_valid_node_credential_is_closed(credential):
    ws = socket(credential)
    ok, code = await ws.connect(timeout=10)
    assert (ok, code) == (False, 4401)


async def test_plain_ws_from_outside_the_allowed_networks_is_refused_before_the_credential_is_read(enrolled):
    node, credential = await sync_to_async(enrolled)()
    ws = socket(credential, client=("203.0.113.9", 50000))
    ok, code = await ws.connect(timeout=10)
    assert (ok, code) == (False, 4403)
    assert await tunnels.holder(async_client(), node.pk) is None
