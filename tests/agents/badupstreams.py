"""Misbehaving agent upstreams on loopback, for the health-check tests and bench/control_loop.py.

One asyncio loop (in a thread of its own, or as `python -m tests.agents.badupstreams`) serves a listener per
upstream, each in one mode:
- `loris`: the whole answer, status line included, one byte per `interval` seconds, for ever;
- `loris-body`: the headers at once (a large Content-Length), then the body one byte per `interval` seconds;
- `flood`: the headers, then an endless body as fast as the client reads it.
It counts connections, the most open at once, and connections the client ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading

MODES = ("loris", "loris-body", "flood")
_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1000000000\r\n\r\n"
_CHUNK = b"x" * 65536


class BadUpstreams:
    def __init__(self, modes: list[str], *, interval: float = 1.0, host: str = "127.0.0.1") -> None:
        for mode in modes:
            if mode not in MODES:
                raise ValueError(f"unknown mode {mode!r}")
        self.modes, self.interval, self.host = list(modes), interval, host
        self.ports: list[int] = []
        self.connections = 0
        self.open = 0
        self.peak_open = 0
        self.client_gone = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._servers: list[asyncio.base_events.Server] = []
        self._tasks: set[asyncio.Task] = set()

    @property
    def urls(self) -> list[str]:
        return [f"http://{self.host}:{port}" for port in self.ports]

    # --- serving ---------------------------------------------------------------------------------
    async def _serve(self, mode: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._tasks.add(asyncio.current_task())
        self.connections += 1
        self.open += 1
        self.peak_open = max(self.peak_open, self.open)
        try:
            with contextlib.suppress(asyncio.LimitOverrunError, asyncio.IncompleteReadError, ValueError):
                await reader.readuntil(b"\r\n\r\n")
            if mode == "flood":
                # A small send buffer: the flood stops when the client stops reading, rather than copying
                # megabytes into loopback buffers on every check (the bench's machine is shared with it).
                writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, len(_CHUNK))
                writer.write(_HEAD)
                while True:
                    writer.write(_CHUNK)
                    await writer.drain()
            head = b"" if mode == "loris" else _HEAD
            if head:
                writer.write(head)
            answer = _HEAD if mode == "loris" else b"x"
            while True:
                for i in range(len(answer)):
                    writer.write(answer[i : i + 1])
                    await writer.drain()
                    await asyncio.sleep(self.interval)
                answer = b"x"
        except (ConnectionError, OSError):
            self.client_gone += 1
        except asyncio.CancelledError:
            pass  # stopping: end quietly (asyncio's stream callback would print the cancellation)
        finally:
            self.open -= 1
            self._tasks.discard(asyncio.current_task())
            writer.transport.abort()

    async def _start(self) -> None:
        for mode in self.modes:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, 0))
            server = await asyncio.start_server(lambda r, w, m=mode: self._serve(m, r, w), sock=sock, backlog=256)
            self._servers.append(server)
            self.ports.append(sock.getsockname()[1])

    async def _stop(self) -> None:
        for server in self._servers:
            server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # --- in a thread -----------------------------------------------------------------------------
    def start(self) -> BadUpstreams:
        ready = threading.Event()

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(self._start())
            ready.set()
            self._loop.run_forever()
            self._loop.run_until_complete(self._stop())
            self._loop.close()

        self._thread = threading.Thread(target=run, name="bad-upstreams", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("the bad upstreams did not start")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)


def main() -> None:
    """`python -m tests.agents.badupstreams MODE=COUNT… [--interval S]`: prints one URL a line, then serves until
    killed (SIGTERM)."""
    import argparse
    import signal
    import sys

    parser = argparse.ArgumentParser()
    parser.add_argument("spec", nargs="+", help="mode=count, e.g. loris=50 flood=50")
    parser.add_argument("--interval", type=float, default=1.0)
    args = parser.parse_args()
    modes = []
    for spec in args.spec:
        mode, _, count = spec.partition("=")
        modes += [mode] * int(count or 1)
    upstreams = BadUpstreams(modes, interval=args.interval).start()
    for mode, url in zip(modes, upstreams.urls, strict=True):
        print(mode, url, flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    while not stop.wait(0.5):
        pass
    upstreams.stop()
    print(f"connections {upstreams.connections} peak-open {upstreams.peak_open}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
