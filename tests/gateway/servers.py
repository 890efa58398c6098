"""Real HTTP servers on loopback for gateway tests: a scriptable upstream agent and the Euler app."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from urllib.parse import parse_qs

import uvicorn


class Upstream:
    """A tiny raw-ASGI agent: /health, /echo/..., /sse, /forever, /status/<code>."""

    def __init__(self, name: str):
        self.name = name
        self.hits = 0
        self.health_status = 200
        self.fail_status = 0  # when set, every call but /health answers this status
        self.stream_closed = threading.Event()
        self.last_headers: dict[str, str] = {}
        self.pages: dict[str, tuple[str, bytes]] = {}  # path -> (content type, body), served as is

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return
        path = scope["path"]
        query = parse_qs(scope["query_string"].decode())
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        if path == "/health":
            await _reply(send, self.health_status, b"ok")
            return
        self.hits += 1
        self.last_headers = headers
        if self.fail_status:
            await _reply(send, self.fail_status, b"failing")
        elif path in self.pages:
            content_type, page = self.pages[path]
            await _reply(send, 200, page, content_type.encode())
        elif path == "/sleep":
            await asyncio.sleep(float(query.get("s", ["1"])[0]))
            await _reply(send, 200, b"late")
        elif path.startswith("/status/"):
            await _reply(send, int(path.rsplit("/", 1)[1]), b"status")
        elif path == "/sse":
            await self._sse(send, int(query.get("n", ["20"])[0]), float(query.get("gap", ["0.05"])[0]))
        elif path == "/forever":
            await self._forever(receive, send)
        else:
            echo = {
                "instance": self.name,
                "method": scope["method"],
                "path": path,
                "query": scope["query_string"].decode(),
                "headers": headers,
                "body": body.decode("latin-1"),
            }
            await _reply(send, 200, json.dumps(echo).encode(), b"application/json", [(b"set-cookie", b"up=1")])

    async def _sse(self, send, n: int, gap: float):
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        for i in range(n):
            await send(
                {"type": "http.response.body", "body": f"data: {i} {time.time():.6f}\n\n".encode(), "more_body": True}
            )
            await asyncio.sleep(gap)
        await send({"type": "http.response.body", "body": b""})

    async def _forever(self, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})

        async def tick():
            while True:
                await send({"type": "http.response.body", "body": b"tick\n", "more_body": True})
                await asyncio.sleep(0.05)

        ticker = asyncio.ensure_future(tick())
        try:
            while (await receive())["type"] != "http.disconnect":
                pass
        finally:
            ticker.cancel()
            self.stream_closed.set()


class FakeOpenAI:
    """A tiny OpenAI-compatible upstream: POST /v1/chat/completions, plain or streamed token by token.

    A streamed answer sends its first token, then waits until the test says it has read it
    (`first_token_read`) before sending the rest: a relay that buffered would never deliver it.
    """

    TOKENS = ["Hel", "lo", " from", " the", " fake"]

    def __init__(self):
        self.requests: list[dict] = []
        self.first_token_read = threading.Event()
        self.streamed: bool | None = None

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        if scope["path"] != "/v1/chat/completions" or scope["method"] != "POST":
            await _reply(send, 404, b'{"error": {"message": "not here"}}', b"application/json")
            return
        request = json.loads(body)
        self.requests.append({"headers": headers, "body": request})
        base = {"id": "chatcmpl-1", "created": 1, "model": request.get("model", "fake")}
        if not request.get("stream"):
            answer = {
                **base,
                "object": "chat.completion",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "".join(self.TOKENS)},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": 1,
                    "completion_tokens": len(self.TOKENS),
                    "total_tokens": 1 + len(self.TOKENS),
                },
            }
            await _reply(send, 200, json.dumps(answer).encode(), b"application/json")
            return
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        for i, token in enumerate(self.TOKENS):
            chunk = {
                **base,
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": {"content": token}, "finish_reason": None}],
            }
            await send(
                {"type": "http.response.body", "body": f"data: {json.dumps(chunk)}\n\n".encode(), "more_body": True}
            )
            if i == 0:
                # True when the client read the first token before the rest was sent: it streamed.
                self.streamed = await asyncio.to_thread(self.first_token_read.wait, 10)
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n", "more_body": True})
        await send({"type": "http.response.body", "body": b""})


async def _reply(send, status, body, content_type=b"text/plain", extra=()):
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode()), *extra]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class ServerThread:
    """Runs an ASGI app under uvicorn in a daemon thread on 127.0.0.1 (port chosen by the OS)."""

    def __init__(self, app, *, server: str = "uvicorn"):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, lifespan="off", log_level="warning", access_log=False, timeout_graceful_shutdown=1)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def start(self) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()
