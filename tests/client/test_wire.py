"""The CLI's standard-library transport against real servers on loopback: HTTP bodies of every framing, a kept-alive
connection the server let go, and websocket frames (long, fragmented, pings, a close, a timeout mid-frame)."""

from __future__ import annotations

import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from euler_client.client import LightClient
from euler_client.errors import ConnectionFailed, NotFound
from euler_client.wire import Closed, Connection, HandshakeRefused, WebSocket, split
from websockets.sync.server import serve


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path.startswith("/api/v1/chunked"):
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for part in (b'{"a": ', b'"x y"}'):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\n\r\n")
        elif self.path.startswith("/api/v1/close"):
            self.send_response(200)
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(b'{"closed": true}')
            self.close_connection = True
        elif self.path.startswith("/api/v1/missing"):
            body = b'{"code": "not_found", "detail": "No such job."}'
            self.send_response(404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            body = (
                f'{{"path": "{self.path}", "key": "{self.headers["X-Euler-API-Key"]}", '
                f'"port": {self.connection.getpeername()[1]}}}'
            ).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(201)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def http_url():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_it_reads_every_framing_and_reuses_the_connection(http_url):
    client = LightClient(http_url, "euler_pk_test")
    try:
        first = client.get("jobs", state="running", limit=2)
        assert first["path"] == "/api/v1/jobs?state=running&limit=2" and first["key"] == "euler_pk_test"
        assert client.get("jobs")["port"] == first["port"]  # the same connection, kept alive
        assert client.get("chunked") == {"a": "x y"}
        assert client.get("close") == {"closed": True}
        assert client.get("jobs")["port"] != first["port"]  # the server closed it: a new one
        assert client.post("jobs", {"name": "é"}) == {"name": "é"}
        with pytest.raises(NotFound) as refused:
            client.get("missing")
        assert refused.value.code == "not_found"
    finally:
        client.close()


def test_a_server_that_does_not_answer_is_connection_failed():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: refused
        with pytest.raises(ConnectionFailed) as failed:
            LightClient(f"http://127.0.0.1:{port}", "k").get("jobs")
    assert failed.value.code == "unreachable" and "connection refused" in failed.value.message


def test_a_kept_alive_connection_the_server_dropped_is_reopened_once(http_url):
    conn = Connection(http_url, {})
    assert conn.request("GET", "/api/v1/jobs")[0] == 200
    conn.sock.shutdown(socket.SHUT_RDWR)  # as if the server had let it go while idle
    assert conn.request("GET", "/api/v1/jobs")[0] == 200
    conn.close()


@pytest.fixture
def ws_url():
    def handler(ws):
        path = ws.request.path
        if path == "/long":
            ws.send("x" * 70_000)  # a 64-bit length
            ws.send("y" * 300)  # a 16-bit length
            ws.send(["frag", "mented"])  # continuation frames
        elif path == "/ping":
            ws.ping(b"hi")
            ws.send("after ping")
            time.sleep(0.5)
            ws.send("late")
        ws.close()

    server = serve(handler, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"ws://127.0.0.1:{server.socket.getsockname()[1]}"
    server.shutdown()


def test_websocket_frames_long_fragmented_then_close(ws_url):
    with WebSocket(ws_url + "/long", {}) as ws:
        assert ws.recv() == "x" * 70_000
        assert ws.recv() == "y" * 300
        assert ws.recv() == "fragmented"
        with pytest.raises(Closed):
            ws.recv()


def test_websocket_answers_pings_and_a_timeout_loses_nothing(ws_url):
    with WebSocket(ws_url + "/ping", {}) as ws:
        assert ws.recv(timeout=5) == "after ping"
        with pytest.raises(TimeoutError):
            ws.recv(timeout=0.05)
        assert ws.recv(timeout=5) == "late"


def test_websocket_refused_upgrade_carries_the_status(http_url):
    with pytest.raises(HandshakeRefused) as refused:
        WebSocket(http_url.replace("http", "ws") + "/api/v1/missing", {})
    assert refused.value.status in (404, 501)


def test_split_reads_hosts_ports_and_targets():
    assert split("https://e.example.com") == (True, "e.example.com", 443, "/")
    assert split("ws://h:8000/ws/jobs/1/logs/?after_seq=3") == (False, "h", 8000, "/ws/jobs/1/logs/?after_seq=3")
    assert split("http://[::1]:9/x") == (False, "::1", 9, "/x")
