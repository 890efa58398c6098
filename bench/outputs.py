"""Job outputs through each store: upload and download MB/s, and the web process's memory around them.

    .venv/bin/python bench/outputs.py [--sizes 50,200] [--backends fs,s3] [--no-docker]

Boots the real web (uvicorn, as the e2e tests do) on a throw-away SQLite database, enrolls a node and makes a job
that declares outputs with an attempt on it, then for each file size (MB of random bytes) drives the node
protocol over HTTP as the agent does: the manifest's plan, then 8 MiB chunk PUTs (filesystem store) or one
presigned PUT plus the done call (S3 store: `moto_server` started as a process), and downloads the file back
through the user API (streamed, sha256 checked). Prints MB/s for each, and the web process's RSS before, its
peak during, and after (sampled every 20 ms). `docker cp` of the same file out of a stopped container is the
local limit beside them (when a Docker engine answers).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
MB = 1024 * 1024
BUCKET = "euler-bench-outputs"


class Peak:
    """The RSS of a process, sampled in a thread: before, peak, after (MiB)."""

    def __init__(self, pid: int):
        import psutil

        self.proc = psutil.Process(pid)
        self.before = self.peak = self.rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def rss(self) -> float:
        return self.proc.memory_info().rss / MB

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, self.rss())

    def __enter__(self) -> Peak:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.after = self.rss()


def start_moto(tmp: Path) -> tuple[subprocess.Popen, str]:
    from tests.e2e.harness import free_port

    port = free_port()
    exe = shutil.which("moto_server", path=os.path.dirname(sys.executable)) or "moto_server"
    log = open(tmp / "moto.log", "wb")  # noqa: SIM115 - lives as long as the process
    proc = subprocess.Popen([exe, "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    import httpx

    for _ in range(300):
        try:
            httpx.get(url + "/moto-api/", timeout=1)
            break
        except httpx.HTTPError:
            time.sleep(0.1)
    import boto3

    s3 = boto3.client("s3", endpoint_url=url, region_name="us-east-1", aws_access_key_id="bench",
                      aws_secret_access_key="bench")  # fmt: skip
    s3.create_bucket(Bucket=BUCKET)
    return proc, url


def boot(tmp: Path, env: dict):
    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("EULER_DATA_DIR", str(tmp / "data"))
    import django

    django.setup()
    import logging

    logging.getLogger("httpx").setLevel(logging.WARNING)
    from django.core.management import call_command

    from tests.e2e.harness import Platform

    call_command("migrate", verbosity=0)
    return Platform(tmp / "platform", env=env).start(worker=False, beat=False)


def setup_job(node_url: str):
    from django.utils import timezone

    from jobs.models import Attempt, Job
    from nodeagent import protocol
    from nodes.services import enrollment_token_create, node_enroll
    from quotas.models import Quota
    from quotas.services import apikey_create, project_create

    project = project_create(name=f"bench-{uuid.uuid4().hex[:6]}")
    Quota.objects.filter(project=project).update(output_bytes=1 << 40)
    _, key = apikey_create(project=project, label="bench")
    _, token = enrollment_token_create(trust="platform", label="bench")
    res = protocol.Resources(cpu_milli=1000, memory_bytes=1 << 30)
    node, credential = node_enroll(
        req=protocol.EnrollRequest(token=token, name=f"b{uuid.uuid4().hex[:6]}", resources=res)
    )
    job = Job.objects.create(project=project, name="bench", image="x", command=["true"], cpu_milli=1, state="running",
                             memory_bytes=64 << 20, timeout_seconds=60, queued_at=timezone.now(),
                             outputs={"paths": ["/out"], "max_bytes": 1 << 40})  # fmt: skip
    attempt = Attempt.objects.create(job=job, number=1, node=node, node_name=node.name, cpu_milli=1, memory_bytes=1)
    Job.objects.filter(pk=job.pk).update(current_attempt=attempt)
    return job, attempt, key, credential


def upload(http, attempt_id: int, path: Path, name: str, sha: str, size: int) -> None:
    import httpx

    from nodeagent import protocol

    reply = http.post(protocol.PATH_ATTEMPT_OUTPUTS.format(attempt_id=attempt_id),
                      json={"files": [{"path": name, "size": size, "sha256": sha}]})  # fmt: skip
    reply.raise_for_status()
    (up,) = protocol.OutputsPlan.model_validate(reply.json()).uploads
    if up.method == "put":
        with open(path, "rb") as fh:
            httpx.put(up.url, content=fh, headers=up.headers, timeout=300).raise_for_status()
        done = protocol.PATH_ATTEMPT_OUTPUT_DONE.format(attempt_id=attempt_id, file_id=up.file_id)
        assert http.post(done).json()["complete"]
        return
    url = protocol.PATH_ATTEMPT_OUTPUT_FILE.format(attempt_id=attempt_id, file_id=up.file_id)
    with open(path, "rb") as fh:
        start = 0
        while block := fh.read(protocol.MAX_OUTPUT_CHUNK_BYTES):
            end = start + len(block) - 1
            r = http.put(url, content=block, headers={"Content-Range": f"bytes {start}-{end}/{size}"})
            r.raise_for_status()
            start = end + 1
    assert r.json()["complete"]


def download(api, job_id: int, name: str, sha: str) -> None:
    digest = hashlib.sha256()
    with api.stream("GET", f"jobs/{job_id}/outputs/{name}") as r:
        r.raise_for_status()
        for block in r.iter_bytes(MB):
            digest.update(block)
    assert digest.hexdigest() == sha


def docker_cp(path: Path, tmp: Path) -> float | None:
    docker = shutil.which("docker")
    if docker is None or subprocess.run([docker, "info"], capture_output=True).returncode != 0:
        return None
    name = f"euler-bench-outputs-{uuid.uuid4().hex[:8]}"
    subprocess.run([docker, "create", "--name", name, "--label", "euler.bench=outputs", "euler-test/busybox", "true"],
                   check=True, capture_output=True)  # fmt: skip
    try:
        subprocess.run([docker, "cp", str(path), f"{name}:/model.bin"], check=True, capture_output=True)
        t0 = time.perf_counter()
        subprocess.run([docker, "cp", f"{name}:/model.bin", str(tmp / "copied.bin")], check=True, capture_output=True)
        return time.perf_counter() - t0
    finally:
        subprocess.run([docker, "rm", "-f", name], capture_output=True)
        (tmp / "copied.bin").unlink(missing_ok=True)


def run_backend(backend: str, sizes: list[int], files: dict[int, tuple[Path, str]], tmp: Path) -> list[str]:
    import httpx

    env = {"EULER_NODE_HTTP_ALLOWED_NETWORKS": "127.0.0.0/8"}
    moto = None
    if backend == "s3":
        moto, url = start_moto(tmp)
        env.update(EULER_OUTPUTS_BUCKET=BUCKET, EULER_OUTPUTS_ENDPOINT_URL=url, EULER_OUTPUTS_ADDRESSING_STYLE="path",
                   EULER_OUTPUTS_ACCESS_KEY_ID="bench", EULER_OUTPUTS_SECRET_ACCESS_KEY="bench")  # fmt: skip
    platform = boot(tmp / backend, env)
    lines = []
    try:
        job, attempt, key, credential = setup_job(platform.url)
        node = httpx.Client(base_url=platform.url + "/node-api/v1/", headers={"Authorization": f"Bearer {credential}"},
                            timeout=300)  # fmt: skip
        api = httpx.Client(base_url=platform.url + "/api/v1/", headers={"X-Euler-API-Key": key}, timeout=300)
        web = platform.procs["web"].pid
        for size in sizes:
            path, sha = files[size]
            name = f"out/model-{size}.bin"
            with Peak(web) as up:
                t0 = time.perf_counter()
                upload(node, attempt.pk, path, name, sha, size * MB)
                up_s = time.perf_counter() - t0
            with Peak(web) as down:
                t0 = time.perf_counter()
                download(api, job.pk, name, sha)
                down_s = time.perf_counter() - t0
            lines.append(f"| {backend} | {size} MB | upload {size / up_s:7.1f} MB/s | web RSS {up.before:.0f} → peak "
                         f"{up.peak:.0f} → {up.after:.0f} MiB | download {size / down_s:7.1f} MB/s | web RSS "
                         f"{down.before:.0f} → peak {down.peak:.0f} → {down.after:.0f} MiB |")  # fmt: skip
            print(lines[-1], flush=True)
    finally:
        platform.stop()
        if moto is not None:
            moto.terminate()
            moto.wait(timeout=10)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="50,200")
    parser.add_argument("--backends", default="fs,s3")
    parser.add_argument("--no-docker", action="store_true")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="euler-bench-out-") as name:
        tmp = Path(name)
        files = {}
        for size in sizes:
            path = tmp / f"{size}.bin"
            digest = hashlib.sha256()
            with open(path, "wb") as fh:
                for _ in range(size):
                    block = os.urandom(MB)
                    digest.update(block)
                    fh.write(block)
            files[size] = (path, digest.hexdigest())
        backends = args.backends.split(",")
        if len(backends) > 1:  # Django is set up once per process: one backend per child run
            for backend in backends:
                argv = [sys.executable, __file__, "--sizes", args.sizes, "--backends", backend, "--no-docker"]
                subprocess.run(argv, check=True)
        else:
            run_backend(backends[0], sizes, files, tmp)
        if not args.no_docker:
            for size in sizes:
                took = docker_cp(files[size][0], tmp)
                if took is not None:
                    print(f"| docker cp (container → host) | {size} MB | {size / took:7.1f} MB/s |", flush=True)


if __name__ == "__main__":
    main()
