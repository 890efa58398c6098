"""The user side of checkpoints: the declaration at submit, the list (time, size, attempt, files), the download of
the latest or of one as a tar, another project's job answering 404, and the last refusal shown."""

from __future__ import annotations

import io
import tarfile

import pytest

from tests.checkpoints.conftest import manifest, take
from tests.jobs.conftest import seed_body

pytestmark = pytest.mark.django_db


@pytest.fixture
def setup(project, node_and_credential, make_job, node_api):
    node, credential = node_and_credential
    job, attempt = make_job(project, node)
    return job, attempt, node_api(credential)


def test_a_job_declares_a_checkpoint_and_the_detail_shows_it(api):
    r = api.post("/api/v1/jobs", seed_body(checkpoint={"path": "/ckpt", "interval_seconds": 60}), format="json")
    assert r.status_code == 201, r.json()
    assert r.json()["checkpoint"] == {"path": "/ckpt", "interval_seconds": 60, "keep_last": 2}


@pytest.mark.parametrize("value", [{"path": "ckpt"}, {"path": "/ckpt", "interval_seconds": 0}, ["/ckpt"]])
def test_a_bad_checkpoint_gets_a_400_with_a_code(api, value):
    r = api.post("/api/v1/jobs", seed_body(checkpoint=value), format="json")
    assert r.status_code == 400 and r.json()["code"] == "invalid_checkpoint"


def test_the_list_shows_each_committed_checkpoint_newest_first(api, setup):
    job, attempt, client = setup
    take(client, attempt.pk, {"step": b"1"})
    take(client, attempt.pk, {"step": b"22", "m": b"abc"}, reason="stop")
    manifest(client, attempt.pk, [{"path": "x", "size": 1, "sha256": "0" * 64}])  # pending: not listed
    body = api.get(f"/api/v1/jobs/{job.pk}/checkpoints").json()
    assert body["declared"]["path"] == "/ckpt" and body["last_refusal"] is None
    rows = [(c["seq"], c["attempt"], c["reason"], c["size"], c["files"]) for c in body["checkpoints"]]
    assert rows == [(2, 1, "stop", 5, 2), (1, 1, "periodic", 1, 1)]
    assert all(c["created_at"] for c in body["checkpoints"])


def test_the_latest_or_one_downloads_as_a_tar(api, setup):
    job, attempt, client = setup
    take(client, attempt.pk, {"step": b"1"})
    take(client, attempt.pk, {"step": b"2", "sub/m": b"abc"})
    for which, want in (("latest", {"step": b"2", "sub/m": b"abc"}), ("1", {"step": b"1"})):
        r = api.get(f"/api/v1/jobs/{job.pk}/checkpoints/{which}/download")
        assert r.status_code == 200 and r["Content-Type"] == "application/x-tar"
        data = b"".join(r.streaming_content)
        assert len(data) == int(r["Content-Length"])
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            assert {m.name: tar.extractfile(m).read() for m in tar.getmembers()} == want
    missing = api.get(f"/api/v1/jobs/{job.pk}/checkpoints/9/download")
    assert missing.status_code == 404 and missing.json()["code"] == "no_such_checkpoint"


def test_another_projects_job_answers_404(other_api, setup):
    job, attempt, client = setup
    take(client, attempt.pk, {"step": b"1"})
    assert other_api.get(f"/api/v1/jobs/{job.pk}/checkpoints").status_code == 404
    assert other_api.get(f"/api/v1/jobs/{job.pk}/checkpoints/latest/download").status_code == 404


def test_a_refusal_shows_in_the_list(api, setup):
    job, attempt, client = setup
    manifest(client, attempt.pk, [], refused="more than 10000 files")
    body = api.get(f"/api/v1/jobs/{job.pk}/checkpoints").json()
    assert "more than 10000 files" in body["last_refusal"]["message"]


def test_arrays_and_schedules_take_a_checkpoint_like_any_other_field(api, project):
    from jobs.models import Job
    from tests.workflows.conftest import schedule_body

    spec = {"path": "/ckpt", "interval_seconds": 30}
    r = api.post("/api/v1/jobs", seed_body(checkpoint=spec, array={"count": 2}), format="json")
    assert r.status_code == 201, r.json()
    assert {tuple(sorted(j.checkpoint.items())) for j in Job.objects.filter(project=project)} == {
        (("interval_seconds", 30), ("keep_last", 2), ("path", "/ckpt"))
    }
    body = schedule_body()
    body["job"]["checkpoint"] = spec
    assert api.post("/api/v1/schedules", body, format="json").status_code == 201
    body = schedule_body(name="bad")
    body["job"]["checkpoint"] = {"path": "relative"}
    r = api.post("/api/v1/schedules", body, format="json")
    assert r.status_code == 400 and r.json()["code"] == "invalid_checkpoint", r.json()
