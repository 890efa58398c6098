"""The node side of outputs over HTTP (the real test client, the node credential): the plan, chunked uploads with
resume, the checks on each chunk, fencing, and input files."""

from __future__ import annotations

import hashlib
import os

import pytest

from jobs.models import Job, JobEvent
from jobs.outputs.models import OutputFile
from nodeagent import protocol
from tests.outputs.conftest import NODE_API, entry, file_url, plan, put_chunk, upload

pytestmark = pytest.mark.django_db


@pytest.fixture
def setup(project, node_and_credential, make_job, node_api):
    node, credential = node_and_credential
    job, attempt = make_job(project, node)
    return job, attempt, node_api(credential)


def test_a_chunked_upload_resumes_after_an_interrupted_chunk(setup):
    job, attempt, client = setup
    data = os.urandom(3 * 1000 + 17)
    reply = plan(client, attempt.pk, [entry("out/model.bin", data)])
    assert reply.status_code == 200, reply.content
    (upload_,) = protocol.OutputsPlan.model_validate(reply.json()).uploads
    assert (upload_.method, upload_.offset, upload_.path) == ("chunks", 0, "out/model.bin")
    fid = upload_.file_id
    assert put_chunk(client, attempt.pk, fid, data[:1000], 0, len(data)).json() == {"offset": 1000, "complete": False}
    # The agent restarts: the second chunk was lost on the way; it asks where to resume.
    assert client.get(file_url(attempt.pk, fid)).json()["offset"] == 1000
    skipped = put_chunk(client, attempt.pk, fid, data[2000:3000], 2000, len(data))
    assert skipped.status_code == 409
    assert skipped.json()["code"] == "offset_mismatch" and skipped.json()["offset"] == 1000
    # A second manifest (agent restart) keeps the bytes held: the plan says resume at 1000.
    again = protocol.OutputsPlan.model_validate(plan(client, attempt.pk, [entry("out/model.bin", data)]).json())
    assert [(u.file_id, u.offset) for u in again.uploads] == [(fid, 1000)]
    for start in range(1000, len(data), 1000):
        reply = put_chunk(client, attempt.pk, fid, data[start : start + 1000], start, len(data))
        assert reply.status_code == 200, reply.content
    assert reply.json() == {"offset": len(data), "complete": True}
    row = OutputFile.objects.get(pk=fid)
    assert row.complete and row.sha256 == hashlib.sha256(data).hexdigest()
    # Complete: a third manifest has nothing left to send.
    assert plan(client, attempt.pk, [entry("out/model.bin", data)]).json()["uploads"] == []


def test_a_wrong_sha256_is_refused_and_the_file_starts_again(setup):
    job, attempt, client = setup
    data = b"x" * 100
    manifest = [{"path": "out/a", "size": 100, "sha256": hashlib.sha256(b"y" * 100).hexdigest()}]
    fid = plan(client, attempt.pk, manifest).json()["uploads"][0]["file_id"]
    reply = put_chunk(client, attempt.pk, fid, data, 0, 100)
    assert reply.status_code == 400
    assert reply.json()["code"] == "sha256_mismatch" and reply.json()["offset"] == 0
    assert client.get(file_url(attempt.pk, fid)).json() == {"offset": 0, "complete": False}
    assert not OutputFile.objects.get(pk=fid).complete


def test_a_chunk_over_the_limit_is_refused_413(setup):
    job, attempt, client = setup
    size = protocol.MAX_OUTPUT_CHUNK_BYTES + 1
    manifest = [{"path": "out/big", "size": size, "sha256": "0" * 64}]
    fid = plan(client, attempt.pk, manifest).json()["uploads"][0]["file_id"]
    reply = put_chunk(client, attempt.pk, fid, b"\0" * size, 0, size)
    assert reply.status_code == 413
    assert reply.json()["code"] == "output_chunk_too_large"


def test_a_chunk_that_does_not_match_its_content_range_is_refused(setup):
    job, attempt, client = setup
    fid = plan(client, attempt.pk, [entry("out/a", b"abc")]).json()["uploads"][0]["file_id"]
    bad = client.generic("PUT", file_url(attempt.pk, fid), b"abc", content_type="application/octet-stream",
                         HTTP_CONTENT_RANGE="bytes 0-3/3")  # fmt: skip
    assert bad.status_code == 400 and bad.json()["code"] == "invalid_content_range"
    wrong_size = put_chunk(client, attempt.pk, fid, b"abc", 0, 4)
    assert wrong_size.status_code == 400 and wrong_size.json()["code"] == "invalid_content_range"


def test_another_nodes_credential_is_refused(setup, other_node_and_credential, node_api):
    job, attempt, client = setup
    fid = plan(client, attempt.pk, [entry("out/a", b"abc")]).json()["uploads"][0]["file_id"]
    other = node_api(other_node_and_credential[1])
    assert plan(other, attempt.pk, [entry("out/a", b"abc")]).status_code == 409
    reply = put_chunk(other, attempt.pk, fid, b"abc", 0, 3)
    assert reply.status_code == 409 and reply.json()["code"] == "stale_attempt"
    assert other.get(file_url(attempt.pk, fid)).status_code == 409
    assert OutputFile.objects.get(pk=fid).received == 0


def test_no_credential_is_refused(setup):
    job, attempt, client = setup
    from rest_framework.test import APIClient

    assert plan(APIClient(), attempt.pk, []).status_code == 401


def test_an_attempt_that_is_no_longer_current_is_refused(setup):
    job, attempt, client = setup
    Job.objects.filter(pk=job.pk).update(current_attempt=None)
    assert plan(client, attempt.pk, [entry("out/a", b"abc")]).status_code == 409


def test_files_over_the_job_cap_or_the_quota_are_refused_and_the_job_says_why(project, node_and_credential, make_job,
                                                                              node_api):  # fmt: skip
    from jobs.outputs.rules import FILE_CHARGE_MIN_BYTES as MIN

    node, credential = node_and_credential
    project.quota.output_bytes = 3 * MIN  # each file counts at least MIN bytes
    project.quota.save()
    job, attempt = make_job(project, node, outputs={"paths": ["/out"], "max_bytes": 200})
    client = node_api(credential)
    files = [entry("out/a", b"a" * 150), entry("out/b", b"b" * 100), entry("out/c", b"c" * 50)]
    skipped = [{"path": "out/link", "reason": "symlink", "message": "points outside /out"}]
    reply = plan(client, attempt.pk, files, skipped=skipped, skipped_total=1).json()
    assert [u["path"] for u in reply["uploads"]] == ["out/a", "out/c"]
    assert [(r["path"], r["reason"]) for r in reply["refused"]] == [("out/b", "job_cap")]
    job.refresh_from_db()
    assert job.outputs_truncated and "out/link (symlink" in job.outputs_reason
    event = JobEvent.objects.filter(job=job, reason__startswith="outputs").last()
    assert "out/b (job_cap" in event.message and "2 output file(s)" in event.message
    # A second job of the project finds only what the quota has left (3 MIN - 2 files held).
    job2, attempt2 = make_job(project, node)
    reply = plan(client, attempt2.pk, [entry("out/d", b"d" * 60), entry("out/e", b"e" * 40)]).json()
    assert [u["path"] for u in reply["uploads"]] == ["out/d"]
    assert [(r["path"], r["reason"]) for r in reply["refused"]] == [("out/e", "quota")]


def test_a_job_without_declared_outputs_gets_no_plan(project, node_and_credential, make_job, node_api):
    node, credential = node_and_credential
    job, attempt = make_job(project, node)
    Job.objects.filter(pk=job.pk).update(outputs=None)
    reply = plan(node_api(credential), attempt.pk, [entry("out/a", b"a")])
    assert reply.status_code == 400 and reply.json()["code"] == "no_outputs_declared"


def test_a_bad_manifest_is_a_400(setup):
    job, attempt, client = setup
    url = NODE_API + protocol.PATH_ATTEMPT_OUTPUTS.format(attempt_id=attempt.pk)
    reply = client.post(url, {"files": [{"path": "a", "size": -1, "sha256": "x"}]}, format="json")
    assert reply.status_code == 400 and reply.json()["code"] == "invalid_manifest"
    reply = client.generic("POST", url, b"{nope", content_type="application/json")
    assert reply.status_code == 400 and reply.json()["code"] == "invalid_manifest"


def test_an_empty_file_is_stored_at_once(setup):
    job, attempt, client = setup
    reply = plan(client, attempt.pk, [entry("out/empty", b"")]).json()
    assert reply["uploads"] == []
    assert OutputFile.objects.get(job=job, path="out/empty").complete


def test_a_new_attempt_replaces_the_earlier_attempts_files(setup, outputs_store, django_capture_on_commit_callbacks):
    from jobs.models import Attempt

    job, attempt, client = setup
    fid = plan(client, attempt.pk, [entry("out/a", b"abc")]).json()["uploads"][0]["file_id"]
    upload(client, attempt.pk, fid, b"abc")
    key = OutputFile.objects.get(pk=fid).storage_key
    assert (outputs_store / key).exists()
    second = Attempt.objects.create(job=job, number=2, node=attempt.node, node_name="n", cpu_milli=1, memory_bytes=1)
    Job.objects.filter(pk=job.pk).update(current_attempt=second)
    with django_capture_on_commit_callbacks(execute=True):
        plan(client, second.pk, [entry("out/b", b"b")])
    assert list(OutputFile.objects.filter(job=job).values_list("path", flat=True)) == ["out/b"]
    assert not (outputs_store / key).exists()


def test_an_input_is_served_only_to_the_node_holding_a_job_that_names_it(project, node_and_credential,
                                                                          other_node_and_credential, make_job, node_api):  # fmt: skip
    node, credential = node_and_credential
    client = node_api(credential)
    producer, pa = make_job(project, node)
    data = os.urandom(5000)
    fid = plan(client, pa.pk, [entry("out/model.bin", data)]).json()["uploads"][0]["file_id"]
    upload(client, pa.pk, fid, data)
    consumer, ca = make_job(project, node, inputs_from=[{"job": producer.pk, "path": "out/model.bin", "to": "/in/m"}])
    url = NODE_API + protocol.PATH_INPUT_FILE.format(attempt_id=ca.pk, output_id=fid)
    reply = client.get(url)
    assert reply.status_code == 200
    assert b"".join(reply.streaming_content) == data
    assert reply["X-Euler-Sha256"] == hashlib.sha256(data).hexdigest()
    # The producer's own attempt does not name it as an input; another node does not hold the consumer's attempt.
    assert client.get(NODE_API + protocol.PATH_INPUT_FILE.format(attempt_id=pa.pk, output_id=fid)).status_code == 404
    assert node_api(other_node_and_credential[1]).get(url).status_code == 409


def test_a_manifest_of_many_small_files_is_planned_in_one_go(setup):
    job, attempt, client = setup
    files = [entry(f"out/shard-{i:05}", str(i).encode()) for i in range(3000)]
    reply = plan(client, attempt.pk, files)
    assert reply.status_code == 200
    uploads = reply.json()["uploads"]
    assert [u["path"] for u in uploads] == [f["path"] for f in files]
    assert len({u["file_id"] for u in uploads}) == 3000
    again = plan(client, attempt.pk, files[:10]).json()["uploads"]  # the agent restarted with fewer: the rest go
    assert [u["file_id"] for u in again] == [u["file_id"] for u in uploads[:10]]
    assert OutputFile.objects.filter(attempt=attempt).count() == 10


def test_the_ended_report_drops_files_never_finished_and_says_so(setup):
    job, attempt, client = setup
    up = plan(client, attempt.pk, [entry("out/a", b"abc"), entry("out/b", b"def")]).json()["uploads"]
    upload(client, attempt.pk, up[0]["file_id"], b"abc")
    put_chunk(client, attempt.pk, up[1]["file_id"], b"d", 0, 3)
    report = {"state": "ended", "reason": "exited", "exit_code": 0, "outputs": "failed", "outputs_message": "gone"}
    url = NODE_API + protocol.PATH_ATTEMPT_REPORT.format(attempt_id=attempt.pk)
    assert client.post(url, report, format="json").status_code == 200
    assert list(OutputFile.objects.filter(job=job).values_list("path", flat=True)) == ["out/a"]
    job.refresh_from_db()
    assert job.outputs_truncated
    messages = list(JobEvent.objects.filter(job=job, reason__startswith="outputs").values_list("message", flat=True))
    assert "1 output file(s) were not uploaded in full: out/b" in messages
    assert "outputs were not stored: gone" in messages


def _end(client, attempt_id: int, **extra):
    url = NODE_API + protocol.PATH_ATTEMPT_REPORT.format(attempt_id=attempt_id)
    return client.post(url, {"state": "ended", "reason": "exited", "exit_code": 0, **extra}, format="json")


def _snapshot(job):
    from jobs.models import Attempt

    rows = list(OutputFile.objects.filter(job=job).order_by("pk").values_list("pk", "path", "received", "complete"))
    attempt = Attempt.objects.filter(job=job).values_list("state", "deadline_at", "message").get()
    return rows, attempt, JobEvent.objects.filter(job=job).count(), Job.objects.get(pk=job.pk).outputs_reason


def test_after_the_ended_report_every_outputs_route_is_fenced_and_changes_nothing(setup, outputs_store):
    job, attempt, client = setup
    up = plan(client, attempt.pk, [entry("out/a", b"abc"), entry("out/b", b"defg")]).json()["uploads"]
    upload(client, attempt.pk, up[0]["file_id"], b"abc")
    put_chunk(client, attempt.pk, up[1]["file_id"], b"de", 0, 4)
    assert _end(client, attempt.pk, outputs="truncated").status_code == 200
    before, files = _snapshot(job), sorted(p.name for p in outputs_store.rglob("*") if p.is_file())
    done = NODE_API + protocol.PATH_ATTEMPT_OUTPUT_DONE.format(attempt_id=attempt.pk, file_id=up[0]["file_id"])
    replies = [
        plan(client, attempt.pk, []),  # would delete the stored files
        plan(client, attempt.pk, [entry("out/run.sh", b"evil")]),  # would swap them
        put_chunk(client, attempt.pk, up[0]["file_id"], b"xyz", 0, 3),
        put_chunk(client, attempt.pk, up[1]["file_id"], b"fg", 2, 4),
        client.post(done),
        client.get(file_url(attempt.pk, up[0]["file_id"])),
        _end(client, attempt.pk, outputs="failed", outputs_message="lender text", message="lender text"),
    ]
    assert [(r.status_code, r.json()["code"], r.json()["stop"]) for r in replies] == [(409, "stale_attempt", True)] * 7
    assert _snapshot(job) == before
    assert sorted(p.name for p in outputs_store.rglob("*") if p.is_file()) == files
    assert list(OutputFile.objects.filter(job=job).values_list("path", flat=True)) == ["out/a"]


def test_an_input_is_not_served_for_an_attempt_that_ended(project, node_and_credential, make_job, node_api):
    node, credential = node_and_credential
    client = node_api(credential)
    producer, pa = make_job(project, node)
    fid = plan(client, pa.pk, [entry("out/m", b"abc")]).json()["uploads"][0]["file_id"]
    upload(client, pa.pk, fid, b"abc")
    consumer, ca = make_job(project, node, inputs_from=[{"job": producer.pk, "path": "out/m", "to": "/in/m"}])
    url = NODE_API + protocol.PATH_INPUT_FILE.format(attempt_id=ca.pk, output_id=fid)
    assert client.get(url).status_code == 200
    assert _end(client, ca.pk).status_code == 200
    reply = client.get(url)
    assert reply.status_code == 409 and reply.json()["code"] == "stale_attempt"


def test_names_outside_the_declared_paths_are_refused_never_stored_and_the_job_says_why(setup):
    job, attempt, client = setup
    hostile = [".git/config", ".bashrc", ".ssh/authorized_keys", "outx/a"]
    files = [entry("out/model.bin", b"w"), *(entry(name, b"[core]\n\tfsmonitor = evil\n") for name in hostile)]
    reply = plan(client, attempt.pk, files).json()
    assert [u["path"] for u in reply["uploads"]] == ["out/model.bin"]
    assert [(r["path"], r["reason"]) for r in reply["refused"]] == [(name, "bad_name") for name in hostile]
    assert list(OutputFile.objects.filter(job=job).values_list("path", flat=True)) == ["out/model.bin"]
    job.refresh_from_db()
    assert job.outputs_truncated and ".git/config (bad_name: outside the declared outputs" in job.outputs_reason


def test_an_empty_file_is_stored_without_a_store_write_and_served_as_an_input(setup, outputs_store, make_job,
                                                                             project):  # fmt: skip
    job, attempt, client = setup
    plan(client, attempt.pk, [entry("out/empty", b"")])
    row = OutputFile.objects.get(job=job, path="out/empty")
    assert row.complete and not (outputs_store / row.storage_key).exists()
    consumer, ca = make_job(project, attempt.node, inputs_from=[{"job": job.pk, "path": "out/empty", "to": "/in/e"}])
    reply = client.get(NODE_API + protocol.PATH_INPUT_FILE.format(attempt_id=ca.pk, output_id=row.pk))
    assert reply.status_code == 200 and b"".join(reply.streaming_content) == b""


def test_an_ended_report_that_names_no_outputs_of_a_job_that_declared_them_marks_the_job_truncated(setup):
    job, attempt, client = setup
    assert job.outputs  # the fixture's job declares outputs
    assert _end(client, attempt.pk).status_code == 200  # exited 0, and not a word of its outputs
    job.refresh_from_db()
    assert job.outputs_truncated
    assert JobEvent.objects.filter(job=job, reason="outputs_not_reported").count() == 1
