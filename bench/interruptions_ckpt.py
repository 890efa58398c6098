"""Checkpoints (issue 36), the `checkpoint` section of bench/interruptions.py (the lead joins them at merge).

    .venv/bin/python bench/interruptions_ckpt.py [--mb 256] [--files 64] [--runs 3] [--resume-runs 0]

Throughput: a container writes MB of random bytes spread over FILES files under /ckpt and exits. Per run:
`docker cp CID:/ckpt -` into /dev/null (the engine's archive as the CLI gets it: the local limit), then the agent's
checkpoint of /ckpt (nodeagent/checkpoint.py: the same archive parsed as it arrives, spooled and hashed, then the
manifest, every blob in chunks and the commit) to a loopback sink that speaks the checkpoint protocol and keeps no
bytes; first a full checkpoint (every blob new), then an unchanged one (no blob sent: the read and hash alone).
Prints MB/s, best and median.

Lost steps (`--resume-runs N`): runs the e2e test of a job killed with its node mid-run
(tests/e2e/test_checkpoints.py, real web, worker and agents) N times and prints each run's lost steps (the counter's
last step on the killed node minus the step restored on the second node) and their median and maximum.
"""

from __future__ import annotations

import argparse
import json
import os
import re
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

from nodeagent import checkpoint  # noqa: E402
from nodeagent.client import ControlPlaneClient  # noqa: E402
from nodeagent.outputs.spool import OutputSpool  # noqa: E402

IMAGE = "euler-test/busybox"
MB = 1024 * 1024


class Sink(BaseHTTPRequestHandler):
    """Plans the blobs it has not seen, acknowledges chunks without keeping them, commits."""

    protocol_version = "HTTP/1.1"
    held: set[str] = set()
    blobs: dict[int, str] = {}
    sent = 0

    def log_message(self, *args):
        pass

    def _send(self, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        if self.path.endswith("/commit"):
            self._send({"checkpoint_id": 1, "seq": 1, "committed": True})
            return
        uploads = []
        for f in body.get("files", []):
            if f["sha256"] not in Sink.held and all(u["sha256"] != f["sha256"] for u in uploads):
                blob_id = len(Sink.blobs) + 1
                Sink.blobs[blob_id] = f["sha256"]
                uploads.append({"blob_id": blob_id, "sha256": f["sha256"], "size": f["size"], "method": "chunks"})
        self._send({"checkpoint_id": 1, "seq": 1, "uploads": uploads})

    def do_PUT(self):
        left = int(self.headers["Content-Length"])
        Sink.sent += left
        while left:
            left -= len(self.rfile.read(min(left, 1 << 20)))
        end, size = (int(x) for x in self.headers["Content-Range"].split(" ")[1].split("-")[1].split("/"))
        blob_id = int(self.path.rstrip("/").rsplit("/", 1)[1])
        if end + 1 == size:
            Sink.held.add(Sink.blobs[blob_id])
        self._send({"offset": end + 1, "complete": end + 1 == size})


def throughput(args) -> None:
    client = docker.from_env(timeout=600)
    per_file = args.mb * MB // args.files
    script = f"mkdir /ckpt && for i in $(seq 1 {args.files}); do head -c {per_file} /dev/urandom > /ckpt/f$i; done"
    container = client.containers.run(IMAGE, ["sh", "-c", script], detach=True, labels={"euler.bench": "ckpt"})
    server = ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    plane = ControlPlaneClient(f"http://127.0.0.1:{server.server_address[1]}", credential="bench")
    mb = per_file * args.files / MB
    try:
        container.wait()
        cp, full, same = [], [], []
        with tempfile.TemporaryDirectory() as tmp:
            spool_root = OutputSpool(Path(tmp) / "outputs", cap=1 << 40)
            for run in range(args.runs):
                start = time.perf_counter()
                subprocess.run(["docker", "cp", f"{container.id}:/ckpt", "-"], stdout=subprocess.DEVNULL, check=True)
                cp.append(mb / (time.perf_counter() - start))
                Sink.held.clear()
                for figures in (full, same):
                    Sink.sent = 0
                    spool = spool_root.attempt(run + 1, part="ckpt").open()
                    uploader = checkpoint.BlobUploader(plane, run + 1, spool, closing=threading.Event())
                    start = time.perf_counter()
                    got = checkpoint.collect_dir(client.api, container.id, "/ckpt", spool, seconds=600)
                    outcome = checkpoint.send(uploader, got, "periodic")
                    figures.append(mb / (time.perf_counter() - start))
                    assert "committed" in outcome and len(got.files) == args.files, outcome
                    assert Sink.sent == (per_file * args.files if figures is full else 0), Sink.sent
                    spool.remove()
        print(f"checkpoint of {mb:.0f} MB in {args.files} files, {args.runs} runs")
        for name, figures in (("docker cp /ckpt → /dev/null", cp),
                              ("agent checkpoint, every blob new → sink", full),
                              ("agent checkpoint, unchanged (0 B sent)", same)):  # fmt: skip
            print(f"  {name:42s} best {max(figures):7.1f} MB/s  median {statistics.median(figures):7.1f} MB/s")
    finally:
        plane.close()
        server.shutdown()
        container.remove(force=True)


def lost_steps(runs: int) -> None:
    env = {**os.environ, "CI": os.environ.get("CI", "true")}
    lost = []
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:xdist", "-q", "-s", "tests/e2e/test_checkpoints.py", "-k",
             "resumes_on_another_node"], cwd=REPO, env=env, capture_output=True, text=True,
        )  # fmt: skip
        found = re.search(r"restored at (\d+), lost (\d+)", out.stdout)
        if out.returncode != 0 or not found:
            print(out.stdout[-3000:], out.stderr[-2000:])
            raise SystemExit("the resume run failed")
        lost.append(int(found.group(2)))
        print(f"  resumed job: lost {lost[-1]} steps (interval 5 s, one step a second)")
    print(f"resumed job's lost steps over {runs} runs: median {statistics.median(lost)}, max {max(lost)}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=256)
    parser.add_argument("--files", type=int, default=64)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--resume-runs", type=int, default=0)
    args = parser.parse_args()
    throughput(args)
    if args.resume_runs:
        lost_steps(args.resume_runs)


if __name__ == "__main__":
    main()
