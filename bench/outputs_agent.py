"""The node agent's side of job outputs: collecting a file from a stopped container, beside `docker cp`.

    .venv/bin/python bench/outputs_agent.py [--mb 512] [--runs 3]

A container writes MB of random bytes to /out/model.bin and exits. Then, per run: `docker cp CID:/out/model.bin -`
into /dev/null (the engine's archive as the CLI gets it: the local limit) and into a file on the spool's disk, and
the agent's collect() of /out into its spool (the same archive, parsed as it arrives, written and hashed). Prints MB/s for each, best and median.
Also the agent's chunked upload of the spooled file to a loopback HTTP server that discards the bytes (the
agent's own cost per byte sent, without a control plane behind it).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import docker  # noqa: E402

from nodeagent import protocol  # noqa: E402
from nodeagent.client import ControlPlaneClient  # noqa: E402
from nodeagent.outputs.collect import collect  # noqa: E402
from nodeagent.outputs.spool import OutputSpool  # noqa: E402
from nodeagent.outputs.upload import Uploader  # noqa: E402

IMAGE = "euler-test/busybox"


class Sink(BaseHTTPRequestHandler):
    """Plans every file as chunks from 0 and acknowledges each chunk without keeping it."""

    protocol_version = "HTTP/1.1"
    sizes: dict[int, int] = {}

    def log_message(self, *args):
        pass

    def _send(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        import json

        manifest = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        uploads = []
        for i, f in enumerate(manifest["files"], start=1):
            Sink.sizes[i] = f["size"]
            uploads.append({"file_id": i, "path": f["path"], "method": "chunks", "offset": 0})
        self._send(json.dumps({"uploads": uploads}).encode())

    def do_PUT(self):
        length = int(self.headers["Content-Length"])
        left = length
        while left:
            left -= len(self.rfile.read(min(left, 1 << 20)))
        end, size = (int(x) for x in self.headers["Content-Range"].split(" ")[1].split("-")[1].split("/"))
        done = "true" if end + 1 == size else "false"
        self._send(f'{{"offset": {end + 1}, "complete": {done}}}'.encode())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=512)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    client = docker.from_env(timeout=600)
    container = client.containers.run(
        IMAGE, ["sh", "-c", f"mkdir /out && head -c {args.mb * 1024 * 1024} /dev/urandom > /out/model.bin"],
        detach=True, labels={"euler.bench": "outputs"},
    )  # fmt: skip
    server = ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    plane = ControlPlaneClient(f"http://127.0.0.1:{server.server_address[1]}", credential="bench")
    try:
        container.wait()
        cp, cp_disk, agent, up = [], [], [], []
        with tempfile.TemporaryDirectory() as tmp:
            spool = OutputSpool(Path(tmp) / "outputs", cap=1 << 40)
            spec = protocol.OutputSpec(paths=["/out"], max_bytes=1 << 40)
            for run in range(args.runs):
                start = time.perf_counter()
                subprocess.run(["docker", "cp", f"{container.id}:/out/model.bin", "-"], stdout=subprocess.DEVNULL,
                               check=True)  # fmt: skip
                cp.append(args.mb / (time.perf_counter() - start))
                start = time.perf_counter()
                subprocess.run(["docker", "cp", f"{container.id}:/out/model.bin", f"{tmp}/cp-{run}"], check=True)
                cp_disk.append(args.mb / (time.perf_counter() - start))
                Path(f"{tmp}/cp-{run}").unlink()
                attempt = spool.attempt(run + 1)
                start = time.perf_counter()
                collected = collect(client.api, container.id, spec, attempt)
                agent.append(args.mb / (time.perf_counter() - start))
                assert collected.manifest.files[0].size == args.mb * 1024 * 1024
                start = time.perf_counter()
                outcome = Uploader(plane, run + 1, attempt, closing=threading.Event()).run(collected)
                up.append(args.mb / (time.perf_counter() - start))
                assert outcome[0] == "complete", outcome
                attempt.remove()
        for name, figures in (("docker cp → /dev/null", cp), ("docker cp → a file beside the spool", cp_disk),
                              ("agent collect → spool, sha256", agent),
                              ("agent chunked upload → loopback sink", up)):  # fmt: skip
            print(f"{name:40s} best {max(figures):7.1f} MB/s  median {statistics.median(figures):7.1f} MB/s")
    finally:
        plane.close()
        server.shutdown()
        container.remove(force=True)


if __name__ == "__main__":
    main()
