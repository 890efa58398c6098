"""`euler outputs` and `euler download` against a live server (pytest-django's, in a thread): the files come back
byte for byte, each checked against its sha256, resumed from a `.part` left by a broken transfer."""

from __future__ import annotations

import hashlib
import json
import os

import pytest
from django.utils import timezone
from euler_client.cli import run

from jobs.models import Job
from jobs.outputs import store
from jobs.outputs.models import OutputFile

pytestmark = pytest.mark.django_db(transaction=True)


def stored(job: Job, path: str, data: bytes) -> OutputFile:
    key = f"jobs/{job.pk}/cli/{hashlib.sha1(path.encode()).hexdigest()}"
    store.append(key, 0, data)
    return OutputFile.objects.create(job=job, project_id=job.project_id, path=path, size=len(data),
                                     sha256=hashlib.sha256(data).hexdigest(), storage_key=key, received=len(data),
                                     complete=True, completed_at=timezone.now())  # fmt: skip


@pytest.fixture
def job(project):
    return Job.objects.create(project=project, name="train", image="euler-test/busybox", command=["true"],
                              cpu_milli=100, memory_bytes=64 << 20, timeout_seconds=60, state="succeeded",
                              queued_at=timezone.now(), outputs={"paths": ["/out"], "max_bytes": 1 << 30})  # fmt: skip


class Result:
    def __init__(self, exit_code: int, output: str):
        self.exit_code, self.output = exit_code, output


@pytest.fixture
def euler(live_server, api_key, tmp_path, monkeypatch, capsys):
    """The `euler` command in this process (its main's error handling included): exit status, stdout + stderr."""
    monkeypatch.setenv("EULER_URL", live_server.url)
    monkeypatch.setenv("EULER_API_KEY", api_key)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))

    def call(*args):
        capsys.readouterr()
        status = run(list(args))
        captured = capsys.readouterr()
        return Result(status, captured.out + captured.err)

    return call


def test_it_lists_and_downloads_every_file_verified(euler, job, tmp_path):
    model, log = os.urandom(5 * 1024 * 1024 + 3), b"epoch 1 loss 0.1\n"
    stored(job, "out/model.bin", model)
    stored(job, "out/logs/train.log", log)
    listed = euler("outputs", str(job.pk))
    assert listed.exit_code == 0 and "out/model.bin" in listed.output and "5.0" in listed.output
    as_json = json.loads(euler("outputs", str(job.pk), "--json").output)
    assert {f["path"] for f in as_json["files"]} == {"out/model.bin", "out/logs/train.log"}
    got = euler("download", str(job.pk), "-o", str(tmp_path / "dl"))
    assert got.exit_code == 0, got.output
    assert (tmp_path / "dl/out/model.bin").read_bytes() == model
    assert (tmp_path / "dl/out/logs/train.log").read_bytes() == log


def test_it_downloads_one_file_or_one_directory(euler, job, tmp_path):
    stored(job, "out/model.bin", b"m")
    stored(job, "out/logs/a.log", b"a")
    assert euler("download", str(job.pk), "out/logs", "-o", str(tmp_path)).exit_code == 0
    assert (tmp_path / "out/logs/a.log").exists() and not (tmp_path / "out/model.bin").exists()
    missing = euler("download", str(job.pk), "out/nope", "-o", str(tmp_path))
    assert missing.exit_code == 1 and "no output" in missing.output


def test_it_resumes_a_broken_download_and_refuses_bytes_that_do_not_match(euler, job, tmp_path):
    data = os.urandom(300_000)
    stored(job, "out/model.bin", data)
    (tmp_path / "out").mkdir()
    (tmp_path / "out/model.bin.part").write_bytes(data[:100_000])
    assert euler("download", str(job.pk), "-o", str(tmp_path)).exit_code == 0
    assert (tmp_path / "out/model.bin").read_bytes() == data
    (tmp_path / "out/model.bin").unlink()
    (tmp_path / "out/model.bin.part").write_bytes(b"x" * 100_000)  # not the file's first bytes
    bad = euler("download", str(job.pk), "-o", str(tmp_path))
    assert bad.exit_code == 1 and "sha256" in bad.output
    assert not (tmp_path / "out/model.bin").exists() and not (tmp_path / "out/model.bin.part").exists()
