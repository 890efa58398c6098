"""A lender's modified agent, driven by hand over the node protocol against the real web process (issue 33, 1-5).

No agent and no container: the test is the node. It enrolls, is approved by an operator (the service, as the admin
calls it), polls its assignment and then does what an honest agent never does: names files outside the declared
outputs, keeps uploading and reporting after its `ended` report, repeats that report, calls the upload routes
without progress to hold the deadline, and reports a larger capacity before a GPU change. Each is refused, and the
test reads what the tenant and the platform hold (rows, stored files, events, webhook deliveries, the deadline,
the pinned capacity) before and after: nothing changed.
"""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
import uuid
from datetime import timedelta

import httpx
import pytest

from nodeagent import protocol
from tests.e2e.harness import FEATURE_TICKS
from tests.e2e.test_jobs import Euler

pytestmark = [pytest.mark.e2e]

ENV = {
    **FEATURE_TICKS,  # the webhooks' dispatch
    "EULER_NODE_OFFLINE_AFTER": "600",  # the hand-driven node sends a heartbeat only when the test says so
    "EULER_SCHEDULER_INTERVAL": "1",
    "EULER_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.0/8",
    "EULER_JOB_TIMEOUT_GRACE": "60",
}
EVIL = b"[core]\n\tfsmonitor = touch /tmp/pwned\n"
HOSTILE_NAMES = [".git/config", ".bashrc", ".ssh/authorized_keys", "../x", "/etc/passwd", "outx/a"]
STALE = (409, "stale_attempt", True)


def entry(path: str, data: bytes) -> dict:
    return {"path": path, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


class HandNode:
    """A node that is only this test: each method is one request of the node protocol."""

    def __init__(self, url: str, *, trust: str = "platform", gpus: list[dict] | None = None) -> None:
        from nodes.services import enrollment_token_create

        self.name = f"hand-{uuid.uuid4().hex[:6]}"
        self.http = httpx.Client(base_url=url + "/node-api/v1/", timeout=60, trust_env=False)
        self.resources = {"cpu_milli": 4000, "memory_bytes": 8 << 30, "disk_bytes": 20 << 30, "gpus": gpus or []}
        _, token = enrollment_token_create(trust=trust, project=None, label="hand")
        r = self.http.post(protocol.PATH_ENROLL, json={"token": token, "name": self.name, "resources": self.resources})
        assert r.status_code == 201, r.text
        self.http.headers["Authorization"] = f"Bearer {r.json()['credential']}"

    def approve(self):
        from nodes.models import Node
        from nodes.services import node_approve

        return node_approve(node=Node.objects.get(name=self.name), trust="platform", public_pool=True)

    def heartbeat(self, **resources) -> dict:
        body = {"resources": {**self.resources, **resources}, "running": []}
        r = self.http.post(protocol.PATH_HEARTBEAT, json=body)
        assert r.status_code == 200, r.text
        return r.json()

    def take(self) -> dict:
        """The next assignment: long-polls (the server answers when one is handed over), no sampling."""
        for _ in range(12):
            r = self.http.post(protocol.PATH_POLL, json={"wait": 10})
            assert r.status_code == 200, r.text
            if r.json()["assignments"]:
                return r.json()["assignments"][0]
        raise AssertionError("no assignment in 2 minutes")

    def report(self, attempt_id: int, **body) -> httpx.Response:
        return self.http.post(protocol.PATH_ATTEMPT_REPORT.format(attempt_id=attempt_id), json=body)

    def manifest(self, attempt_id: int, files: list[dict]) -> httpx.Response:
        return self.http.post(protocol.PATH_ATTEMPT_OUTPUTS.format(attempt_id=attempt_id), json={"files": files})

    def offset(self, attempt_id: int, file_id: int) -> httpx.Response:
        return self.http.get(protocol.PATH_ATTEMPT_OUTPUT_FILE.format(attempt_id=attempt_id, file_id=file_id))

    def chunk(self, attempt_id: int, file_id: int, data: bytes, start: int, size: int) -> httpx.Response:
        headers = {"Content-Range": f"bytes {start}-{start + len(data) - 1}/{size}",
                   "Content-Type": "application/octet-stream"}  # fmt: skip
        path = protocol.PATH_ATTEMPT_OUTPUT_FILE.format(attempt_id=attempt_id, file_id=file_id)
        return self.http.put(path, content=data, headers=headers)

    def done(self, attempt_id: int, file_id: int) -> httpx.Response:
        return self.http.post(protocol.PATH_ATTEMPT_OUTPUT_DONE.format(attempt_id=attempt_id, file_id=file_id))


def refused(r: httpx.Response) -> tuple:
    body = r.json()
    return r.status_code, body.get("code"), body.get("stop")


def deadline(attempt_id: int):
    from jobs.models import Attempt

    return Attempt.objects.get(pk=attempt_id).deadline_at


def held(euler: Euler, job_id: int, hook_id: int, store) -> dict:
    """What the tenant and the platform hold of the job: its outputs as listed and as stored, its events, the hook's
    deliveries, the attempt's row."""
    from jobs.models import Attempt
    from workflows.models import Delivery

    job = euler.job(job_id)
    listed = euler.http.get(f"jobs/{job_id}/outputs").json()
    return {
        "files": [(f["path"], f["size"], f["sha256"]) for f in listed["files"]],
        "reason": listed["outputs_reason"],
        "stored": sorted((str(p.relative_to(store)), p.stat().st_size) for p in store.rglob("*") if p.is_file()),
        "events": [(e["to_state"], e["reason"], e["message"]) for e in job["events"]],
        "deliveries": Delivery.objects.filter(hook_id=hook_id).count(),
        "attempt": Attempt.objects.filter(job_id=job_id).values("state", "message", "deadline_at", "ended_at").get(),
        "job": (job["state"], job["exit_code"], job["reason"]),
    }


def test_a_modified_agent_gets_no_file_outside_the_declared_paths_and_no_right_after_its_attempt_ended(
    platform_factory, project
):
    from jobs.outputs import keepalive
    from tests.workflows.receiver import Receiver
    from workflows.models import Delivery

    platform = platform_factory(env=ENV)
    euler = Euler(platform, project)
    node = HandNode(platform.url)
    node.approve()
    assert node.heartbeat()["approval"] == "approved"
    store = platform.tmp / "data" / "outputs"
    with Receiver() as receiver:
        hook = euler.http.post("webhooks", json={"url": receiver.url, "events": ["job.ended"]}).json()
        job = euler.submit(["true"], outputs={"paths": ["/out"], "max_bytes": 1 << 20})
        assignment = node.take()
        aid = assignment["attempt_id"]
        assert assignment["job_id"] == job["id"]
        assert node.report(aid, state="running", container_id="hand").status_code == 200

        # 1. Names outside the declared paths: refused with a reason, never stored or listed.
        model = os.urandom(3000)
        files = [entry("out/model.bin", model), *(entry(name, EVIL) for name in HOSTILE_NAMES)]
        plan = node.manifest(aid, files).json()
        assert [u["path"] for u in plan["uploads"]] == ["out/model.bin"]
        assert [(r["path"], r["reason"]) for r in plan["refused"]] == [(n, "bad_name") for n in HOSTILE_NAMES]
        fid = plan["uploads"][0]["file_id"]

        # 4. Calls without progress do not move the deadline backstop; progress moves it up to the cap only.
        before = deadline(aid)
        assert node.manifest(aid, files).status_code == 200
        assert node.offset(aid, fid).json() == {"offset": 0, "complete": False}
        assert refused(node.chunk(aid, fid, model[1000:2000], 1000, 3000))[:2] == (409, "offset_mismatch")
        assert deadline(aid) == before
        for start in (0, 1000, 2000):
            assert node.chunk(aid, fid, model[start : start + 1000], start, 3000).status_code == 200
        progressed = deadline(aid)
        assert node.chunk(aid, fid, model[2000:], 2000, 3000).json() == {"offset": 3000, "complete": True}
        assert node.done(aid, fid).status_code == 200 and node.manifest(aid, files).status_code == 200
        assert deadline(aid) == progressed  # a complete file again, a done call, a manifest: no progress
        started = euler.job(job["id"])["attempts"][0]["started_at"]
        from django.utils.dateparse import parse_datetime

        allowance = keepalive.upload_allowance(max_bytes=1 << 20, grace=60, rate=1024 * 1024)
        assert progressed <= parse_datetime(started) + timedelta(seconds=60 + 60 + allowance)

        # The honest end, and its one delivery.
        ended = node.report(aid, state="ended", reason="exited", exit_code=0, outputs="truncated",
                            outputs_message="1 file kept, 6 left out")  # fmt: skip
        assert ended.status_code == 200, ended.text
        assert euler.wait_state(job["id"], {"succeeded", "failed"})["state"] == "succeeded"
        platform.wait_for(lambda: Delivery.objects.filter(hook_id=hook["id"]).exists(), "the job.succeeded delivery")
        snapshot = held(euler, job["id"], hook["id"], store)
        assert [f[0] for f in snapshot["files"]] == ["out/model.bin"]
        assert ".git/config (bad_name: outside the declared outputs" in snapshot["reason"]

        # 2 and 3. After `ended`: a manifest (empty: it would delete; another: it would swap), a chunk, a done call,
        # an offset, an input-less report, and five duplicate `ended` reports carrying the lender's text.
        lender = "lender text: see https://evil.example"
        attempts = [
            node.manifest(aid, []),
            node.manifest(aid, [entry("out/model.bin", EVIL), entry("out/run.sh", EVIL)]),
            node.chunk(aid, fid, EVIL, 0, len(EVIL)),
            node.done(aid, fid),
            node.offset(aid, fid),
            node.report(aid, state="running", container_id="again"),
            *(
                node.report(
                    aid,
                    state="ended",
                    reason="exited",
                    exit_code=0,
                    message=lender,
                    outputs="failed",
                    outputs_message=lender,
                )
                for _ in range(5)
            ),  # fmt: skip
        ]
        assert [refused(r) for r in attempts] == [STALE] * len(attempts)

        # The dispatcher has read every event up to a later one (another job's end): nothing came of the above.
        marker = euler.submit(["true"], node_selector={"nowhere": "x"})
        assert euler.http.post(f"jobs/{marker['id']}/cancel").status_code == 200
        platform.wait_for(
            lambda: Delivery.objects.filter(hook_id=hook["id"], payload__data__job__id=marker["id"]).exists(),
            "the marker's delivery",
        )
    after = held(euler, job["id"], hook["id"], store)
    assert after == {**snapshot, "deliveries": snapshot["deliveries"] + 1}  # the marker's, nothing else
    assert not any(lender in str(e) for e in after["events"])
    archive = euler.http.get(f"jobs/{job['id']}/outputs.tar")
    with tarfile.open(fileobj=io.BytesIO(archive.content)) as tar:
        assert [(m.name, tar.extractfile(m).read()) for m in tar.getmembers()] == [("out/model.bin", model)]


def test_re_approval_after_a_gpu_change_keeps_the_approved_capacity(platform_factory, project):
    from jobs.models import Job
    from nodes.models import Node

    platform = platform_factory(env=ENV)
    euler = Euler(platform, project)
    card = {"uuid": "GPU-hand-0", "index": 0, "model": "NVIDIA H100", "memory_bytes": 80 << 30}
    node = HandNode(platform.url, gpus=[card])
    node.approve()
    assert node.heartbeat(cpu_milli=1_000_000)["approval"] == "approved"  # held at 4000: pending
    row = Node.objects.get(name=node.name)
    assert (row.cpu_milli, row.approved_cpu_milli, row.pending_capacity) == (4000, 4000, {"cpu_milli": 1_000_000})
    changed = {**card, "memory_bytes": card["memory_bytes"] + 1}  # one byte: a GPU change, back to pending
    assert node.heartbeat(cpu_milli=1_000_000, gpus=[changed])["approval"] == "pending"

    node.approve()  # the operator approves the routine GPU change
    assert node.heartbeat(cpu_milli=1_000_000, gpus=[changed])["approval"] == "approved"
    row = Node.objects.get(name=node.name)
    assert (row.cpu_milli, row.approved_cpu_milli, row.pending_capacity) == (4000, 4000, {"cpu_milli": 1_000_000})
    assert not row.events.filter(kind="capacity_approved").exists()

    # The scheduler sees 4 cores: a job asking 8 waits, one asking 4 is placed (after the 8 was considered).
    big = euler.submit(["true"], cpu_milli=8000)
    fits = euler.submit(["true"], cpu_milli=4000)
    assert node.take()["job_id"] == fits["id"]
    assert Job.objects.get(pk=big["id"]).state == "queued"
