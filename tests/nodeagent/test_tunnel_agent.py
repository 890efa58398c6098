"""The node tunnel's agent end (nodeagent/tunnel.py) against a websocket server played by the test.

The replica is a TCP server on loopback here (`socket_for` hands out plain sockets): what is under test is the
agent's side of the protocol — the handshake, OPEN answered by OPENED or CLOSE, bytes both ways, the window.
"""

from __future__ import annotations

import asyncio
import socket

import pytest
from websockets.asyncio.server import serve

from nodeagent import protocol_tunnel as wire
from nodeagent.tunnel import Tunnel

ATTEMPT = 5


async def _frame(ws) -> tuple[int, int, bytes]:
    return wire.decode(await asyncio.wait_for(ws.recv(), 10))


@pytest.fixture
async def replica():
    """A replica on loopback: upper-cases what it reads; `/flood` (the first line) makes it write 100 chunks."""

    async def handle(reader, writer):
        first = await reader.readline()
        if first.startswith(b"/flood"):
            for _ in range(100):
                writer.write(b"x" * wire.MAX_CHUNK)
                await writer.drain()
        else:
            writer.write(first.upper())
            while data := await reader.read(1024):
                writer.write(data.upper())
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    yield server.sockets[0].getsockname()[1]
    server.close()


@pytest.fixture
async def control_plane():
    """A websocket server: yields (url, queue of accepted connections with their request)."""
    accepted: asyncio.Queue = asyncio.Queue()
    done = asyncio.Event()

    async def handler(ws):
        await accepted.put(ws)
        await done.wait()

    async with serve(handler, "127.0.0.1", 0) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        yield f"http://127.0.0.1:{port}", accepted
        done.set()


def _plain(attempt_id: int):
    if attempt_id != ATTEMPT:
        return None
    sock = socket.socket()
    sock.setblocking(False)
    return sock


@pytest.fixture
async def tunnel(control_plane):
    url, accepted = control_plane
    made = Tunnel(base_url=url, credential=lambda: "euler_node_test", socket_for=_plain)
    made.start()
    ws = await asyncio.wait_for(accepted.get(), 10)
    yield ws
    await asyncio.get_running_loop().run_in_executor(None, made.close)


async def test_the_agent_dials_the_tunnel_path_with_its_credential(tunnel):
    assert tunnel.request.path == "/node-api/v1/tunnel"
    assert tunnel.request.headers["Authorization"] == "Bearer euler_node_test"


async def test_an_open_is_answered_and_bytes_go_both_ways(tunnel, replica):
    await tunnel.send(wire.open_frame(7, attempt=ATTEMPT, port=replica))
    assert await _frame(tunnel) == (wire.OPENED, 7, b"")
    await tunnel.send(wire.encode(wire.DATA, 7, b"hello\n"))
    assert await _frame(tunnel) == (wire.DATA, 7, b"HELLO\n")
    await tunnel.send(wire.encode(wire.EOF, 7))  # the caller is done sending: the replica closes its side
    assert await _frame(tunnel) == (wire.EOF, 7, b"")
    await tunnel.send(wire.close_frame(7))


async def test_an_attempt_it_does_not_run_or_a_closed_port_is_refused_saying_why(tunnel, replica):
    await tunnel.send(wire.open_frame(1, attempt=ATTEMPT + 1, port=replica))
    kind, stream, reason = await _frame(tunnel)
    assert (kind, stream) == (wire.CLOSE, 1) and b"no such attempt" in reason
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        closed_port = unused.getsockname()[1]
    await tunnel.send(wire.open_frame(2, attempt=ATTEMPT, port=closed_port))
    kind, stream, reason = await _frame(tunnel)
    assert (kind, stream) == (wire.CLOSE, 2) and b"cannot reach" in reason
    await tunnel.send(wire.encode(wire.OPEN, 3, b"not json"))
    assert (await _frame(tunnel))[:2] == (wire.CLOSE, 3)


async def test_at_most_a_window_of_data_frames_travels_unacknowledged(tunnel, replica):
    await tunnel.send(wire.open_frame(9, attempt=ATTEMPT, port=replica))
    assert (await _frame(tunnel))[0] == wire.OPENED
    await tunnel.send(wire.encode(wire.DATA, 9, b"/flood\n"))
    for _ in range(wire.WINDOW):
        assert (await _frame(tunnel))[:2] == (wire.DATA, 9)
    with pytest.raises(TimeoutError):  # the window is spent: nothing more until an ACK
        await asyncio.wait_for(tunnel.recv(), 0.5)
    await tunnel.send(wire.ack_frame(9, 3))
    for _ in range(3):
        assert (await _frame(tunnel))[:2] == (wire.DATA, 9)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(tunnel.recv(), 0.5)
    await tunnel.send(wire.close_frame(9))


def test_namespaces_are_opened_once_per_container_and_let_go_when_its_attempt_stops_serving():
    import os

    from nodeagent.netns import Namespaces

    if os.geteuid() != 0:
        pytest.skip("setns needs CAP_SYS_ADMIN")
    serving = {1: "c1", 2: "c2"}
    looked_up = []

    def pid_of(cid: str) -> int:
        looked_up.append(cid)
        return os.getpid()  # this process's own namespace stands in for a container's

    spaces = Namespaces(container_of=serving.get, pid_of=pid_of)
    try:
        for attempt in (1, 1, 2):
            with spaces.socket_for(attempt) as sock:
                assert sock.family == socket.AF_INET and not sock.getblocking()
        assert looked_up == ["c1", "c2"]  # one descriptor per container, reused
        del serving[1]
        assert spaces.socket_for(1) is None  # no longer serving: no socket
        spaces.socket_for(2).close()
        assert set(spaces.fds) == {"c2"}  # c1's descriptor was let go
    finally:
        spaces.close()
