"""A loopback control plane for the outputs and inputs protocol: a real HTTP server on 127.0.0.1 in a thread.

It answers reports and logs like the server, plans uploads ("chunks" or "put" to its own presigned-style URL),
takes chunks with Content-Range, answers the offset it holds, verifies sha256, serves input files, and can be
told to fail (faults) so that resuming is tested.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PREFIX = "/node-api/v1/"
CREDENTIAL = "euler_node_test-outputs"


class OutputsPlane:
    def __init__(self, *, method: str = "chunks"):
        self.method = method
        self.lock = threading.Lock()
        self.reports: dict[int, list[dict]] = {}
        self.manifests: dict[int, list[dict]] = {}
        self.files: dict[int, dict] = {}  # file_id → {"attempt", "path", "size", "sha256", "data", "complete"}
        self.by_path: dict[tuple[int, str], int] = {}
        self.put_headers = {"x-amz-meta-euler": "yes", "Content-Type": "application/octet-stream"}
        self.seen_put_headers: list[dict] = []
        self.refuse: set[str] = set()  # paths the plan refuses (like the project's quota)
        self.faults: list[str] = []  # per chunk PUT, in order: "ok" | "500_after_store" | "500" | "409" | "stale"
        self.chunk_puts = 0
        self.chunk_bytes = 0
        self.inputs: dict[int, bytes] = {}  # output_id → bytes served to a node
        self.input_auth: list[str] = []
        self.down = False
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)

    def ended(self, attempt_id: int) -> dict | None:
        return next((r for r in self.reports.get(attempt_id, []) if r["state"] == "ended"), None)

    def stored(self, attempt_id: int) -> dict[str, dict]:
        return {f["path"]: f for f in self.files.values() if f["attempt"] == attempt_id}

    def input_url(self, attempt_id: int, output_id: int) -> str:
        return f"{self.url}{PREFIX}attempts/{attempt_id}/inputs/{output_id}"

    # --- the protocol ------------------------------------------------------------------------------
    def plan(self, attempt_id: int, manifest: dict) -> dict:
        self.manifests.setdefault(attempt_id, []).append(manifest)
        uploads, refused = [], []
        for f in manifest["files"]:
            if f["path"] in self.refuse:
                refused.append({"path": f["path"], "reason": "quota", "message": "the project's output quota"})
                continue
            key = (attempt_id, f["path"])
            if key not in self.by_path:
                self.by_path[key] = len(self.files) + 1
                self.files[self.by_path[key]] = {"attempt": attempt_id, "data": bytearray(), "complete": False, **f}
            fid = self.by_path[key]
            held = self.files[fid]
            if self.method == "put":
                url = f"{self.url}/bucket/{fid}?X-Amz-Signature=abc"
                uploads.append(
                    {"file_id": fid, "path": f["path"], "method": "put", "url": url, "headers": self.put_headers}
                )
            else:
                uploads.append({"file_id": fid, "path": f["path"], "method": "chunks", "offset": len(held["data"])})
        return {"uploads": uploads, "refused": refused}

    def verify(self, f: dict) -> tuple[int, dict]:
        if len(f["data"]) == f["size"]:
            if hashlib.sha256(f["data"]).hexdigest() != f["sha256"]:
                return 422, {"code": "checksum_mismatch", "detail": "sha256 differs"}
            f["complete"] = True
        return 200, {"offset": len(f["data"]), "complete": f["complete"]}


def _handler(plane: OutputsPlane):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def _body(self) -> bytes:
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def _send(self, status: int, body: dict | None = None) -> None:
            data = json.dumps(body or {}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _node(self) -> list[str] | None:
            if plane.down:
                self._send(503, {"code": "down"})
                return None
            if self.headers.get("Authorization") != f"Bearer {CREDENTIAL}":
                self._send(401, {"code": "unauthenticated"})
                return None
            return self.path[len(PREFIX) :].split("?")[0].split("/")

        def do_POST(self):
            body = self._body()
            parts = self._node()
            if parts is None:
                return
            attempt_id = int(parts[1])
            with plane.lock:
                if parts[2] == "report":
                    plane.reports.setdefault(attempt_id, []).append(json.loads(body))
                    return self._send(200, {"accepted": True})
                if parts[2] == "logs":
                    return self._send(200, {"stored": len(json.loads(body)["chunks"])})
                if parts[2] == "outputs" and len(parts) == 3:
                    return self._send(200, plane.plan(attempt_id, json.loads(body)))
                if parts[2] == "outputs" and parts[4:] == ["done"]:
                    return self._send(*plane.verify(plane.files[int(parts[3])]))
            self._send(404, {"code": "not_found"})

        def do_GET(self):
            if self.path.startswith("/bucket-in/"):  # a presigned GET: no credential expected
                plane.input_auth.append(self.headers.get("Authorization", ""))
                data = plane.inputs[int(self.path.split("/")[2].split("?")[0])]
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
            parts = self._node()
            if parts is None:
                return
            with plane.lock:
                if parts[2] == "outputs":
                    f = plane.files[int(parts[3])]
                    return self._send(200, {"offset": len(f["data"]), "complete": f["complete"]})
                if parts[2] == "inputs":
                    plane.input_auth.append(self.headers.get("Authorization", ""))
                    data = plane.inputs[int(parts[3])]
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_PUT(self):
            body = self._body()
            if self.path.startswith("/bucket/"):
                plane.seen_put_headers.append(dict(self.headers))
                if self.headers.get("Authorization"):
                    return self._send(400, {"code": "credential_sent_to_the_bucket"})
                f = plane.files[int(self.path.split("/")[2].split("?")[0])]
                f["data"] = bytearray(body)
                return self._send(200)
            parts = self._node()
            if parts is None:
                return
            with plane.lock:
                f = plane.files[int(parts[3])]
                fault = plane.faults.pop(0) if plane.faults else "ok"
                plane.chunk_puts += 1
                plane.chunk_bytes += len(body)
                if fault == "stale":
                    return self._send(409, {"code": "stale_attempt"})
                if fault == "500":
                    return self._send(500, {"code": "boom"})
                match = re.fullmatch(r"bytes (\d+)-(\d+)/(\d+)|bytes \*/0", self.headers.get("Content-Range", ""))
                if not match:
                    return self._send(400, {"code": "bad_range"})
                start = int(match.group(1) or 0)
                if fault == "409" or start != len(f["data"]):
                    return self._send(409, {"code": "offset_mismatch", "offset": len(f["data"])})
                f["data"] += body
                status, reply = plane.verify(f)
                if fault == "500_after_store":
                    return self._send(500, {"code": "boom"})
                return self._send(status, reply)

    return Handler
