"""Job outputs and inputs end to end: web, worker, beat and a real agent; a job leaves 50 MB of random bytes and a
log directory, the API serves the identical bytes, and a second job starts from the first one's file."""

from __future__ import annotations

import hashlib
import re
import uuid

import pytest

from tests.e2e.test_jobs import FAST, Euler, euler  # noqa: F401 - the fixture
from tests.outputs.test_s3 import s3_server  # noqa: F401 - the fixture: moto in server mode, a process

pytestmark = [pytest.mark.e2e, pytest.mark.docker]

MODEL_BYTES = 50 * 1024 * 1024
SHA = re.compile(r"\b([0-9a-f]{64})\b")


def download_sha256(user: Euler, job_id: int, path: str, **headers) -> tuple[str, int]:
    digest, size = hashlib.sha256(), 0
    with user.http.stream("GET", f"jobs/{job_id}/outputs/{path}", headers=headers, timeout=120) as r:
        assert r.status_code in (200, 206), r.read()
        for block in r.iter_bytes(1024 * 1024):
            digest.update(block)
            size += len(block)
    return digest.hexdigest(), size


@pytest.fixture
def euler_s3(platform_factory, project, docker_engine, s3_server):  # noqa: F811
    """A platform whose outputs live in a bucket of the real S3-compatible server (moto, a process)."""
    import boto3

    bucket = f"e2e-{uuid.uuid4().hex[:8]}"
    creds = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing", "region_name": "us-east-1"}
    s3 = boto3.client("s3", endpoint_url=s3_server, **creds)
    s3.create_bucket(Bucket=bucket)
    env = FAST | {
        "EULER_OUTPUTS_BUCKET": bucket,
        "EULER_OUTPUTS_ENDPOINT_URL": s3_server,
        "EULER_OUTPUTS_ACCESS_KEY_ID": "testing",
        "EULER_OUTPUTS_SECRET_ACCESS_KEY": "testing",
        "EULER_OUTPUTS_ADDRESSING_STYLE": "path",
    }
    e = Euler(platform_factory(env=env), project)
    e.bucket = (s3, bucket)
    yield e
    e.cleanup()


def test_a_jobs_50_mb_output_downloads_identical_and_a_second_job_starts_from_it(euler):  # noqa: F811
    model_and_input(euler)


def test_the_same_through_an_s3_bucket_the_agent_uploads_to_directly(euler_s3):
    model_and_input(euler_s3)
    s3, bucket = euler_s3.bucket
    sizes = [o["Size"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]
    assert MODEL_BYTES in sizes  # in the bucket, put there by the agent's presigned PUT
    web_store = euler_s3.platform.tmp / "data" / "outputs"
    assert not web_store.exists() or not any(p.is_file() for p in web_store.rglob("*"))  # nothing through the web


def model_and_input(euler: Euler) -> None:  # noqa: F811
    euler.node()
    script = (
        f"mkdir -p /out/logs && head -c {MODEL_BYTES} /dev/urandom > /out/model.bin"
        " && echo 'epoch 1 loss 0.5' > /out/logs/train.log && ln -s /etc/passwd /out/logs/passwd"
        " && sha256sum /out/model.bin"
    )
    first = euler.submit(["sh", "-c", script], outputs=["/out"], memory_bytes=128 * 1024 * 1024, timeout_seconds=300)
    # Submitted now: it waits until the first job's file is stored, then reads it before its command starts.
    second = euler.submit(
        ["sh", "-c", "sha256sum /in/model.bin && wc -c < /in/model.bin"],
        inputs_from=[{"job": first["id"], "path": "out/model.bin", "to": "/in/model.bin"}],
        timeout_seconds=300,
    )
    done = euler.wait_state(first["id"], {"succeeded", "failed", "cancelled", "lost"}, timeout=300)
    assert done["state"] == "succeeded", done
    printed = SHA.search(euler.logs(first["id"])).group(1)

    listing = euler.http.get(f"jobs/{first['id']}/outputs").json()
    files = {f["path"]: f for f in listing["files"]}
    assert set(files) == {"out/model.bin", "out/logs/train.log"}
    assert files["out/model.bin"]["size"] == MODEL_BYTES and files["out/model.bin"]["sha256"] == printed
    # The symlink is refused, said so on the job; never followed.
    assert listing["outputs_truncated"] is True and "symlink" in listing["outputs_reason"]
    assert download_sha256(euler, first["id"], "out/model.bin") == (printed, MODEL_BYTES)
    log = euler.http.get(f"jobs/{first['id']}/outputs/out/logs/train.log")
    assert log.status_code == 200 and log.content == b"epoch 1 loss 0.5\n"
    # A broken download resumes with Range.
    tail = euler.http.get(f"jobs/{first['id']}/outputs/out/model.bin", headers={"Range": f"bytes={MODEL_BYTES - 10}-"})
    assert tail.status_code == 206 and len(tail.content) == 10

    ended = euler.wait_state(second["id"], {"succeeded", "failed", "cancelled", "lost"}, timeout=300)
    assert ended["state"] == "succeeded", ended
    out = euler.logs(second["id"])
    assert SHA.search(out).group(1) == printed and str(MODEL_BYTES) in out


HOSTILE = {
    # what the job leaves in /out → the reason the job's event log gives. (More than 10,000 files: the agent's
    # tests, tests/nodeagent/test_outputs_collect.py, on a real container; here the server's plan of 10,000 rows
    # takes minutes on a loaded CI machine.)
    "symlink": ("ln -s /etc/passwd /out/passwd && ln -s / /out/root", "symlink"),
    "fifo": ("mkfifo /out/pipe", "special"),
    "not_utf8": ("echo x > \"/out/$(printf 'bad\\377name')\"", "not_utf8"),
    "job_cap": ("head -c 3000000 /dev/urandom > /out/big && echo small > /out/small", "job_cap"),
    # A sparse terabyte: nothing on the job's disk, a terabyte of zeros in the engine's archive. Read no further
    # (what the archive holds after it is not read either: the bomb sits last here, after the kept file).
    "tar_bomb": ("mkdir /out/zz && truncate -s 1099511627776 /out/zz/bomb", "not read"),
}


def test_each_hostile_output_is_refused_with_a_clear_reason_on_the_job(euler):  # noqa: F811
    euler.node()
    jobs = {
        case: euler.submit(
            ["sh", "-c", f"mkdir /out && echo kept > /out/kept.txt && {script}"],
            outputs={"paths": ["/out", "/never/written"], "max_bytes": 2_000_000},
            timeout_seconds=300,
        )
        for case, (script, _) in HOSTILE.items()
    }
    for case, job in jobs.items():
        done = euler.wait_state(job["id"], {"succeeded", "failed", "cancelled", "lost"}, timeout=300)
        assert done["state"] == "succeeded", (case, done)
        reason = HOSTILE[case][1]
        assert done["outputs_truncated"] is True, case
        messages = " ".join(e["message"] for e in done["events"] if e["reason"].startswith("outputs"))
        assert reason in messages and "missing" in messages, (case, messages)
        stored = {f["path"] for f in euler.http.get(f"jobs/{job['id']}/outputs").json()["files"]}
        assert "out/kept.txt" in stored, case
        if case == "job_cap":
            assert "out/small" in stored and "out/big" not in stored
