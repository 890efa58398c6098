"""The bucket path of outputs against a real S3-compatible server (moto in server mode, started as a process on a
free loopback port for the session), through the same boto3 client that production uses: presigned PUT and done,
a wrong upload refused, downloads streamed from the bucket, inputs as presigned GETs."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time

import httpx
import pytest

from jobs.outputs.models import OutputFile
from nodeagent import protocol
from tests.e2e.harness import _die_with_parent
from tests.outputs.conftest import NODE_API, entry, plan
from tests.ports import free_port

pytestmark = pytest.mark.django_db
BUCKET = "euler-outputs-test"


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    port = free_port()
    exe = shutil.which("moto_server", path=os.path.dirname(sys.executable))
    argv = [exe] if exe else [sys.executable, "-m", "moto.server"]
    log = open(tmp_path_factory.mktemp("moto") / "moto.log", "wb")  # noqa: SIM115 - closed below
    # Dies with this test process (an interrupted xdist worker skips the teardown below and would leave it running).
    proc = subprocess.Popen(
        [*argv, "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(url + "/moto-api/", timeout=1)
                break
            except httpx.HTTPError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("moto_server did not start") from None
                time.sleep(0.2)
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture
def bucket(settings, s3_server):
    from jobs.outputs import conf  # noqa: F401 - the settings' shape is conf.EULER_OUTPUTS_STORAGE's

    settings.EULER_OUTPUTS_BUCKET = BUCKET
    settings.EULER_OUTPUTS_PREFIX = "t"
    settings.STORAGES = {
        **settings.STORAGES,
        "outputs": {
            "BACKEND": "storages.backends.s3.S3Storage",
            "OPTIONS": {
                "bucket_name": BUCKET, "endpoint_url": s3_server, "region_name": "us-east-1",
                "access_key": "testing", "secret_key": "testing", "addressing_style": "path", "location": "t",
                "file_overwrite": True, "default_acl": None, "signature_version": "s3v4",
            },
        },
    }  # fmt: skip
    from jobs.outputs import store

    client = store.storage().connection.meta.client
    try:
        client.create_bucket(Bucket=BUCKET)
    except client.exceptions.BucketAlreadyOwnedByYou:
        pass
    return client


@pytest.fixture
def setup(project, node_and_credential, make_job, node_api, bucket):
    node, credential = node_and_credential
    job, attempt = make_job(project, node)
    return job, attempt, node_api(credential)


def _done(client, attempt_id: int, file_id: int):
    return client.post(NODE_API + protocol.PATH_ATTEMPT_OUTPUT_DONE.format(attempt_id=attempt_id, file_id=file_id))


def test_a_file_goes_to_the_bucket_by_presigned_put_and_comes_back_by_the_api(setup, api):
    job, attempt, client = setup
    data = os.urandom(3 * 1024 * 1024 + 5)
    reply = plan(client, attempt.pk, [entry("out/model.bin", data)])
    (up,) = protocol.OutputsPlan.model_validate(reply.json()).uploads
    assert up.method == "put" and up.url.startswith("http://127.0.0.1:") and "x-amz-checksum-sha256" in up.headers
    assert httpx.put(up.url, content=data, headers=up.headers).status_code == 200
    assert _done(client, attempt.pk, up.file_id).json() == {"offset": len(data), "complete": True}
    row = OutputFile.objects.get(pk=up.file_id)
    assert row.complete
    got = api.get(f"/api/v1/jobs/{job.pk}/outputs/out/model.bin")
    assert got.status_code == 200 and b"".join(got.streaming_content) == data
    part = api.get(f"/api/v1/jobs/{job.pk}/outputs/out/model.bin", HTTP_RANGE="bytes=10-19")
    assert part.status_code == 206 and b"".join(part.streaming_content) == data[10:20]


def test_an_upload_that_is_not_the_manifests_file_is_refused(setup):
    job, attempt, client = setup
    data = b"the real bytes"
    (up,) = protocol.OutputsPlan.model_validate(plan(client, attempt.pk, [entry("out/a", data)]).json()).uploads
    httpx.put(up.url, content=b"other bytes!!!", headers=up.headers)  # same size; S3 itself would refuse it
    reply = _done(client, attempt.pk, up.file_id)
    assert reply.status_code == 400 and reply.json()["code"] == "sha256_mismatch"
    assert not OutputFile.objects.get(pk=up.file_id).complete
    nothing = plan(client, attempt.pk, [entry("out/b", b"bbb")]).json()["uploads"][-1]
    assert _done(client, attempt.pk, nothing["file_id"]).json()["code"] == "sha256_mismatch"  # never uploaded


def test_an_input_is_a_presigned_get_of_the_object(setup, make_job, node_and_credential, bucket):
    from jobs.outputs import selectors

    job, attempt, client = setup
    data = os.urandom(100_000)
    (up,) = protocol.OutputsPlan.model_validate(plan(client, attempt.pk, [entry("out/m", data)]).json()).uploads
    httpx.put(up.url, content=data, headers=up.headers)
    _done(client, attempt.pk, up.file_id)
    consumer, ca = make_job(job.project, node_and_credential[0],
                            inputs_from=[{"job": job.pk, "path": "out/m", "to": "/in/m"}])  # fmt: skip
    (given,) = selectors.assignment_fields(job=consumer, attempt=ca)["inputs"]
    assert not given.authenticated and given.sha256 == hashlib.sha256(data).hexdigest()
    assert httpx.get(given.url).content == data


def test_deleting_the_row_deletes_the_object(setup, bucket, django_capture_on_commit_callbacks):
    job, attempt, client = setup
    (up,) = protocol.OutputsPlan.model_validate(plan(client, attempt.pk, [entry("out/a", b"abc")]).json()).uploads
    httpx.put(up.url, content=b"abc", headers=up.headers)
    row = OutputFile.objects.get(pk=up.file_id)
    key = f"t/{row.storage_key}"
    assert bucket.head_object(Bucket=BUCKET, Key=key)["ContentLength"] == 3
    with django_capture_on_commit_callbacks(execute=True):
        row.delete()
    with pytest.raises(bucket.exceptions.ClientError):
        bucket.head_object(Bucket=BUCKET, Key=key)
