"""A registry on loopback that speaks enough of the v2 API for a pull (manifests, blobs, a bearer token realm), with
switches for what a hostile one answers instead (a realm, a redirect elsewhere), and a TCP listener that counts
the connections it is sent. The image it serves is built from the local busybox image (`docker save`)."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import socket
import tarfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SCHEMA2 = "application/vnd.docker.distribution.manifest.v2+json"
INDEX = "application/vnd.oci.image.index.v1+json"


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def image_from_engine(api, image: str) -> tuple[bytes, list[bytes]]:
    """(config, gzipped layers) of a local image, as a registry stores them."""
    raw = io.BytesIO(b"".join(api.get_image(image)))
    with tarfile.open(fileobj=raw) as tar:
        entry = json.load(tar.extractfile("manifest.json"))[0]
        config = tar.extractfile(entry["Config"]).read()
        layers = [gzip.compress(tar.extractfile(name).read(), mtime=0) for name in entry["Layers"]]
    return config, layers


class Registry:
    """Serves one repository. `realm`: a token realm URL (then the manifest asks for a bearer token); `redirect`:
    {what: url} sends `manifest`, `config` or `layer` requests there (a 307) instead of answering."""

    def __init__(self, config: bytes, layers: list[bytes], repository: str):
        self.repository = repository
        self.blobs = {digest(config): config, **{digest(layer): layer for layer in layers}}
        self.config_digest = digest(config)
        self.manifest = json.dumps(
            {
                "schemaVersion": 2,
                "mediaType": SCHEMA2,
                "config": {
                    "mediaType": "application/vnd.docker.container.image.v1+json",
                    "size": len(config),
                    "digest": digest(config),
                },
                "layers": [
                    {
                        "mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip",
                        "size": len(layer),
                        "digest": digest(layer),
                    }
                    for layer in layers
                ],
            }
        ).encode()
        self.manifest_digest = digest(self.manifest)
        other = {"mediaType": SCHEMA2, "size": 10, "digest": "sha256:" + "0" * 64}
        self.index = json.dumps(
            {
                "schemaVersion": 2,
                "mediaType": INDEX,
                "manifests": [
                    {**other, "platform": {"os": "linux", "architecture": "arm64", "variant": "v8"}},
                    {
                        "mediaType": SCHEMA2,
                        "size": len(self.manifest),
                        "digest": self.manifest_digest,
                        "platform": {"os": "linux", "architecture": "amd64"},
                    },
                ],
            }
        ).encode()
        self.realm: str | None = None
        self.redirect: dict[str, str] = {}
        self.corrupt = False
        self.requests: list[str] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)

    def _handler(self):
        registry = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # one request per connection: each hop resolves and dials anew

            def handle(self):
                if self.connection.recv(1, socket.MSG_PEEK) == b"\x16":
                    return  # a TLS handshake (the https attempt at an insecure registry): plain HTTP only here
                super().handle()

            def log_message(self, *args):
                pass

            def _send(self, status, body=b"", headers=()):
                self.send_response(status)
                for key, value in headers:
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                registry.requests.append(self.path)
                registry.route(self)

        return Handler

    def route(self, h) -> None:
        path = h.path.split("?", 1)[0]
        prefix = f"/v2/{self.repository}/"
        if path == "/token":
            return h._send(200, json.dumps({"token": "good"}).encode())
        if path.startswith("/direct/"):
            return self._blob(h, path.removeprefix("/direct/"))
        if not path.startswith(prefix):
            return h._send(404, b'{"errors":[{"code":"NAME_UNKNOWN"}]}')
        if self.realm and h.headers.get("Authorization") != "Bearer good":
            return h._send(401, b"{}", [("WWW-Authenticate", f'Bearer realm="{self.realm}",service="fake"')])
        kind, _, ref = path.removeprefix(prefix).partition("/")
        if kind == "manifests":
            if "manifest" in self.redirect:
                return h._send(307, headers=[("Location", self.redirect["manifest"])])
            if ref == "multi":
                return h._send(200, self.index, [("Content-Type", INDEX)])
            if ref in ("1", self.manifest_digest):
                return h._send(200, self.manifest, [("Content-Type", SCHEMA2)])
            return h._send(404, b'{"errors":[{"code":"MANIFEST_UNKNOWN"}]}')
        what = "config" if ref == self.config_digest else "layer"
        if what in self.redirect:
            return h._send(307, headers=[("Location", self.redirect[what].format(digest=ref))])
        return self._blob(h, ref)

    def _blob(self, h, ref: str) -> None:
        data = self.blobs.get(ref)
        if data is None:
            return h._send(404)
        if self.corrupt and ref != self.config_digest:
            data = data[:-1] + bytes([data[-1] ^ 1])
        h._send(200, data, [("Content-Type", "application/octet-stream")])


class Listener:
    """A TCP listener at (host, port) that counts the connections it accepts."""

    def __init__(self, host: str, port: int):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, port))
        self.sock.listen(16)
        self.accepted = 0
        self.seen = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            self.seen.set()
            conn.close()

    def close(self) -> None:
        if self.sock.fileno() == -1:
            return
        self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self.thread.join(timeout=5)
