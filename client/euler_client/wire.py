"""The CLI's own transport: HTTP/1.1 over one kept-alive socket, and the job-log websocket (RFC 6455, client side).

Standard library only (the built-in `_socket`; `socket` and `ssl` for https://), so that a command pays a few
milliseconds to talk to the server instead of the ~150 ms of CPU that importing httpx and websockets costs at every
start. It speaks just
what the Euler API needs: JSON requests, answers with Content-Length, chunked or read to the close, and text
frames from the server. The Python library (`Client`) keeps httpx; `LightClient` (client.py) uses this.
"""

from __future__ import annotations

import _socket  # the C module under `socket`: all a plain connection needs (see _connect)
import os
import time
from binascii import b2a_base64

WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


class HandshakeRefused(Exception):
    """The server answered the websocket upgrade with an HTTP status instead of 101."""

    def __init__(self, status: int):
        super().__init__(f"HTTP {status}")
        self.status = status


class Closed(Exception):
    """The websocket is closed (a close frame, or the connection dropped)."""


def split(url: str) -> tuple[bool, str, int, str]:
    """`https://host:8443/a?b` → (secure, host, port, "/a?b"), without urllib.parse (it imports ipaddress)."""
    scheme, _, rest = url.partition("://")
    netloc, slash, target = rest.partition("/")
    netloc = netloc.rpartition("@")[2]
    secure = scheme in ("https", "wss")
    if netloc.startswith("["):  # [::1]:8000
        host, _, port = netloc[1:].partition("]")
        port = port.lstrip(":")
    else:
        host, _, port = netloc.partition(":")
    return secure, host or "localhost", int(port) if port else (443 if secure else 80), slash + target or "/"


def _b64(data: bytes) -> str:
    return b2a_base64(data, newline=False).decode()


def _connect(address: bytes | str, port: int, timeout: float) -> _socket.socket:
    """socket.create_connection, on the built-in module: `socket` (its enums, `selectors`) costs ~3.5 ms of the CLI's
    start-up, and a plain connection needs none of it. Each address in turn; the last failure is raised."""
    failure: OSError | None = None
    for family, kind, proto, _, sockaddr in _socket.getaddrinfo(address, port, 0, _socket.SOCK_STREAM):
        sock = _socket.socket(family, kind, proto)
        try:
            sock.settimeout(timeout)
            sock.connect(sockaddr)
        except OSError as exc:
            sock.close()
            failure = exc
            continue
        sock.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)
        return sock
    raise failure or OSError(f"no address for {address!r}")


def _open(url: str, timeout: float) -> tuple[_socket.socket, str]:
    """A connected socket to the URL's host (TLS for https:// and wss://) and the Host header."""
    secure, host, port, _ = split(url)
    # An ASCII host as bytes: given a str, getaddrinfo imports the idna codec (~4 ms) to encode it.
    address = host.encode() if host.isascii() else host
    if secure:
        import socket
        import ssl

        sock = socket.create_connection((address, port), timeout=timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock = ssl.create_default_context().wrap_socket(sock, server_hostname=host)
    else:
        sock = _connect(address, port, timeout)
    name = f"[{host}]" if ":" in host else host
    default = (secure and port == 443) or (not secure and port == 80)
    return sock, name if default else f"{name}:{port}"


class _Reader:
    """Buffered reads from a socket: lines and exact byte counts."""

    def __init__(self, sock: _socket.socket):
        self.sock, self.buf = sock, b""

    def _more(self) -> None:
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionResetError("the server closed the connection")
        self.buf += data

    def line(self) -> bytes:
        while b"\r\n" not in self.buf:
            self._more()
        line, _, self.buf = self.buf.partition(b"\r\n")
        return line

    def exactly(self, n: int) -> bytes:
        while len(self.buf) < n:
            self._more()
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def rest(self) -> bytes:
        try:
            while True:
                self._more()
        except ConnectionResetError:
            data, self.buf = self.buf, b""
            return data

    def head(self) -> tuple[int, dict[str, str]]:
        """The status line and headers (names lower-cased)."""
        status = int(self.line().split(b" ", 2)[1])
        headers: dict[str, str] = {}
        while line := self.line():
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        return status, headers


class Connection:
    """One HTTP/1.1 connection, kept alive between requests and reopened once if the server closed it."""

    def __init__(self, url: str, headers: dict[str, str], *, timeout: float = 30.0):
        self.url, self.headers, self.timeout = url, headers, timeout
        self.sock: _socket.socket | None = None
        self.reader: _Reader | None = None
        self.host = ""

    def request(self, method: str, target: str, body: bytes | None = None,
                content_type: str = "application/json") -> tuple[int, dict[str, str], bytes]:  # fmt: skip
        for again in (True, False):
            reused = self.sock is not None
            if not reused:
                self.sock, self.host = _open(self.url, self.timeout)
                self.reader = _Reader(self.sock)
            try:
                return self._exchange(method, target, body, content_type)
            except (ConnectionResetError, BrokenPipeError):
                self.close()
                if not (again and reused):  # only a kept-alive connection the server let go is retried
                    raise
        raise AssertionError("unreachable")

    def _exchange(self, method, target, body, content_type) -> tuple[int, dict[str, str], bytes]:
        lines = [f"{method} {target} HTTP/1.1", f"Host: {self.host}", "Accept: application/json"]
        lines += [f"{k}: {v}" for k, v in self.headers.items()]
        if body is not None or method in ("POST", "PUT", "PATCH"):
            lines += [f"Content-Type: {content_type}", f"Content-Length: {len(body or b'')}"]
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b""))
        status, headers = self.reader.head()
        if method == "HEAD" or status in (204, 304):
            data = b""
        elif "chunked" in headers.get("transfer-encoding", ""):
            parts = []
            while size := int(self.reader.line().split(b";")[0], 16):
                parts.append(self.reader.exactly(size))
                self.reader.line()
            while self.reader.line():  # trailers
                pass
            data = b"".join(parts)
        elif "content-length" in headers:
            data = self.reader.exactly(int(headers["content-length"]))
        else:
            data = self.reader.rest()
            headers["connection"] = "close"
        if headers.get("connection", "").lower() == "close":
            self.close()
        return status, headers, data

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = self.reader = None


class WebSocket:
    """A client websocket that receives text messages (pings answered, close frames returned)."""

    def __init__(self, url: str, headers: dict[str, str], *, timeout: float = 10.0):
        self.sock, host = _open(url, timeout)
        self.reader = _Reader(self.sock)
        target = split(url)[3]
        key = _b64(os.urandom(16))
        lines = [f"GET {target} HTTP/1.1", f"Host: {host}", "Upgrade: websocket", "Connection: Upgrade",
                 f"Sec-WebSocket-Key: {key}", "Sec-WebSocket-Version: 13"]  # fmt: skip
        lines += [f"{k}: {v}" for k, v in headers.items()]
        try:
            self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
            status, answer = self.reader.head()
            if status != 101:
                raise HandshakeRefused(status)
            try:
                from _sha1 import sha1  # the built-in module: hashlib would load OpenSSL
            except ImportError:
                from hashlib import sha1

            expected = _b64(sha1(key.encode() + WS_GUID).digest())  # RFC 6455's fixed use of SHA-1
            if answer.get("sec-websocket-accept") != expected:
                raise Closed("the server's Sec-WebSocket-Accept does not match")
        except BaseException:
            self.sock.close()
            raise
        self.closed = False

    def recv(self, timeout: float | None = None) -> str:
        """The next text message. TimeoutError after `timeout` seconds of silence; Closed at the end."""
        deadline = None if timeout is None else time.monotonic() + timeout
        parts: list[bytes] = []
        while True:
            opcode, fin, payload = self._frame(deadline)
            if opcode == 0x8:  # close: answer it, then the connection is over
                self._send(0x8, payload[:2])
                self.close()
                raise Closed(payload[2:].decode("utf-8", "replace"))
            if opcode == 0x9:
                self._send(0xA, payload)
            elif opcode in (0x0, 0x1, 0x2):
                parts.append(payload)
                if fin:
                    return b"".join(parts).decode("utf-8")

    def _frame(self, deadline: float | None) -> tuple[int, bool, bytes]:
        """One whole frame; bytes are only taken from the buffer once the frame is complete, so a timeout
        in the middle of a frame loses nothing."""
        while True:
            buf = self.reader.buf
            if len(buf) >= 2:
                length, start = buf[1] & 0x7F, 2
                if length == 126 and len(buf) >= 4:
                    length, start = int.from_bytes(buf[2:4], "big"), 4
                elif length == 127 and len(buf) >= 10:
                    length, start = int.from_bytes(buf[2:10], "big"), 10
                if length < 126 or start > 2:
                    if buf[1] & 0x80:
                        start += 4  # a masked frame from the server is not expected; skip its key
                    if len(buf) >= start + length:
                        self.reader.buf = buf[start + length :]
                        payload = buf[start : start + length]
                        if buf[1] & 0x80:
                            mask = buf[start - 4 : start]
                            payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
                        return buf[0] & 0x0F, bool(buf[0] & 0x80), payload
            if self.closed:
                raise Closed("closed")
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise TimeoutError
            self.sock.settimeout(remaining)
            try:
                self.reader._more()
            except TimeoutError:
                raise
            except OSError as exc:
                self.close()
                raise Closed(str(exc)) from None

    def _send(self, opcode: int, payload: bytes) -> None:
        """A masked frame (clients must mask); only short control frames are sent."""
        if self.closed:
            return
        mask = os.urandom(4)
        body = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        try:
            self.sock.sendall(bytes([0x80 | opcode, 0x80 | len(payload)]) + mask + body)
        except OSError:
            self.close()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.sock.close()

    def __enter__(self) -> WebSocket:
        return self

    def __exit__(self, *exc) -> None:
        if not self.closed:
            self._send(0x8, (1000).to_bytes(2, "big"))
        self.close()
