"""The response side of the load generators' minimal keep-alive HTTP/1.1 clients (bench/heartbeats.py,
bench/nodes_sim.py): they share the CPUs with the server they measure, so they skip an HTTP library."""

from __future__ import annotations

import asyncio


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bytes, bool]:
    """One response: (status, body, whether the server closes the connection). ConnectionError when closed."""
    status_line = await reader.readline()
    if not status_line:
        raise ConnectionError("closed")
    length, close = 0, False
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b""):
            break
        name, _, value = line.decode("latin-1").partition(":")
        if name.lower() == "content-length":
            length = int(value)
        elif name.lower() == "connection" and "close" in value.lower():
            close = True
    payload = await reader.readexactly(length) if length else b""
    return int(status_line.split()[1]), payload, close
