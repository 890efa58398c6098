"""The user side of outputs: submit checks, the list, one file with Range, the tar of all; the scheduler's gate
and what an assignment carries."""

from __future__ import annotations

import hashlib
import io
import os
import tarfile

import pytest
from django.utils import timezone

from jobs.models import Job
from jobs.outputs import store
from jobs.outputs.models import OutputFile
from tests.jobs.conftest import seed_body

pytestmark = pytest.mark.django_db


def stored(job: Job, path: str, data: bytes) -> OutputFile:
    key = f"jobs/{job.pk}/t/{hashlib.sha1(path.encode()).hexdigest()}"
    store.append(key, 0, data)
    return OutputFile.objects.create(job=job, project_id=job.project_id, path=path, size=len(data),
                                     sha256=hashlib.sha256(data).hexdigest(), storage_key=key, received=len(data),
                                     complete=True, completed_at=timezone.now())  # fmt: skip


@pytest.fixture
def submit(api):
    def do(client=None, status=201, **over):
        r = (client or api).post("/api/v1/jobs", seed_body(**over), format="json")
        assert r.status_code == status, r.json()
        return r.json()

    return do


def test_a_job_declares_outputs_and_the_detail_shows_them(submit):
    job = submit(outputs=["/out"])
    assert job["outputs"] == {"paths": ["/out"], "max_bytes": 1 << 30}
    assert job["outputs_truncated"] is False and job["inputs_from"] == []


@pytest.mark.parametrize(
    "field,value,code",
    [
        ("outputs", ["out"], "invalid_outputs"),
        ("outputs", ["/out/../etc"], "invalid_outputs"),
        ("outputs", {"paths": ["/out"], "max_bytes": 1 << 60}, "invalid_outputs"),
        ("inputs_from", [{"job": 1, "path": "../x", "to": "/in/x"}], "invalid_inputs_from"),
        ("inputs_from", [{"job": 1, "path": "x", "to": "in"}], "invalid_inputs_from"),
    ],
)
def test_bad_outputs_and_inputs_get_a_400_with_a_code(submit, field, value, code):
    body = submit(status=400, **{field: value})
    assert body["code"] == code


def test_an_input_from_another_projects_job_is_a_404(submit, other_api):
    theirs = submit(client=other_api, outputs=["/out"])
    body = submit(status=404, inputs_from=[{"job": theirs["id"], "path": "out/a", "to": "/in/a"}])
    assert body["code"] == "not_found"


def test_an_input_the_job_does_not_declare_is_a_400(submit):
    producer = submit(outputs=["/out"])
    body = submit(status=400, inputs_from=[{"job": producer["id"], "path": "logs/a", "to": "/in/a"}])
    assert body["code"] == "no_such_output"
    ok = submit(inputs_from=[{"job": producer["id"], "path": "out/model.bin", "to": "/in/model.bin"}])
    assert ok["inputs_from"] == [{"job": producer["id"], "path": "out/model.bin", "to": "/in/model.bin"}]


def test_it_lists_a_jobs_outputs_and_hides_them_from_another_project(api, other_api, submit):
    job = Job.objects.get(pk=submit(outputs=["/out"])["id"])
    stored(job, "out/b.txt", b"bee")
    stored(job, "out/a.txt", b"a")
    body = api.get(f"/api/v1/jobs/{job.pk}/outputs").json()
    assert [(f["path"], f["size"]) for f in body["files"]] == [("out/a.txt", 1), ("out/b.txt", 3)]
    assert body["files"][0]["sha256"] == hashlib.sha256(b"a").hexdigest() and body["total_bytes"] == 4
    assert other_api.get(f"/api/v1/jobs/{job.pk}/outputs").status_code == 404
    assert other_api.get(f"/api/v1/jobs/{job.pk}/outputs/out/a.txt").status_code == 404
    assert other_api.get(f"/api/v1/jobs/{job.pk}/outputs.tar").status_code == 404


def test_it_serves_a_file_whole_and_by_range(api, submit):
    job = Job.objects.get(pk=submit(outputs=["/out"])["id"])
    data = os.urandom(1_000_000)
    stored(job, "out/model.bin", data)
    url = f"/api/v1/jobs/{job.pk}/outputs/out/model.bin"
    whole = api.get(url, HTTP_ACCEPT="application/octet-stream")
    assert whole.status_code == 200 and whole["Content-Length"] == str(len(data))
    assert b"".join(whole.streaming_content) == data
    assert whole["Accept-Ranges"] == "bytes" and "model.bin" in whole["Content-Disposition"]
    part = api.get(url, HTTP_RANGE="bytes=1000-1999")
    assert part.status_code == 206 and part["Content-Range"] == f"bytes 1000-1999/{len(data)}"
    assert b"".join(part.streaming_content) == data[1000:2000]
    tail = api.get(url, HTTP_RANGE="bytes=-10")
    assert b"".join(tail.streaming_content) == data[-10:]
    past = api.get(url, HTTP_RANGE=f"bytes={len(data)}-")
    assert past.status_code == 416 and past["Content-Range"] == f"bytes */{len(data)}"
    assert api.get(f"/api/v1/jobs/{job.pk}/outputs/out/nope").json()["code"] == "no_such_output"


def test_the_archive_is_a_tar_of_every_file(api, submit):
    job = Job.objects.get(pk=submit(outputs=["/out"])["id"])
    files = {"out/model.bin": os.urandom(70_001), "out/logs/train.log": b"epoch 1\n", "out/empty": b""}
    for path, data in files.items():
        stored(job, path, data)
    reply = api.get(f"/api/v1/jobs/{job.pk}/outputs.tar")
    assert reply.status_code == 200
    raw = b"".join(reply.streaming_content)
    assert len(raw) == int(reply["Content-Length"])
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        got = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}
    assert got == files


def test_a_job_with_inputs_waits_for_them_then_its_assignment_carries_them(api, submit, make_node, settings):
    from jobs.node_hooks import poll_provider
    from jobs.scheduling import cycle

    settings.EULER_PUBLIC_URL = "http://euler.test:8000"
    producer = Job.objects.get(pk=submit(outputs=["/out"], name="producer")["id"])
    Job.objects.filter(pk=producer.pk).update(state="succeeded", ended_at=timezone.now())
    consumer_id = submit(inputs_from=[{"job": producer.pk, "path": "out/m.bin", "to": "/in/m.bin"}])["id"]
    node = make_node()
    cycle.one_pass()
    consumer = Job.objects.get(pk=consumer_id)
    assert consumer.state == "queued"
    assert (
        consumer.pending_reason == f"input out/m.bin of job {producer.pk}: that job ended without it (cancel this job)"
    )
    row = stored(producer, "out/m.bin", b"model")
    cycle.one_pass()
    consumer.refresh_from_db()
    assert consumer.state == "assigned"
    (assignment,) = poll_provider(node)[0]
    (given,) = assignment.inputs
    assert given.to == "/in/m.bin" and given.size == 5 and given.sha256 == row.sha256 and given.authenticated
    assert given.url == f"http://euler.test:8000/node-api/v1/attempts/{assignment.attempt_id}/inputs/{row.pk}"
    assert assignment.outputs is None


def test_the_assignment_carries_the_declared_outputs(submit, make_node):
    from jobs.node_hooks import poll_provider
    from jobs.scheduling import cycle

    submit(outputs={"paths": ["/out", "/var/log/app"], "max_bytes": 5000})
    node = make_node()
    cycle.one_pass()
    (assignment,) = poll_provider(node)[0]
    assert assignment.outputs.paths == ["/out", "/var/log/app"] and assignment.outputs.max_bytes == 5000
