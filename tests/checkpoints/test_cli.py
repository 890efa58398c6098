"""`euler checkpoints` and `euler download --checkpoint` against a live server: the list, and the latest (or one)
checkpoint's files written byte for byte under the target directory."""

from __future__ import annotations

import json
import os

import pytest

from tests.checkpoints.conftest import take

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_lists_checkpoints_and_downloads_the_latest_or_one(euler, project, node_and_credential, make_job, node_api,
                                                              tmp_path):  # fmt: skip
    node, credential = node_and_credential
    job, attempt = make_job(project, node)
    client = node_api(credential)
    take(client, attempt.pk, {"step": b"1"})
    big = os.urandom(3 * 1024 * 1024 + 5)
    take(client, attempt.pk, {"step": b"2", "sub/model.bin": big}, reason="stop")
    listed = euler("checkpoints", str(job.pk), "--json")
    assert listed.exit_code == 0, listed.output
    assert [c["seq"] for c in json.loads(listed.output)["checkpoints"]] == [2, 1]
    table = euler("checkpoints", str(job.pk))
    assert "stop" in table.output and "periodic" in table.output
    got = euler("download", "--checkpoint", str(job.pk), "-o", str(tmp_path / "latest"))
    assert got.exit_code == 0, got.output
    assert (tmp_path / "latest" / "step").read_bytes() == b"2"
    assert (tmp_path / "latest" / "sub" / "model.bin").read_bytes() == big
    one = euler("download", "--checkpoint", "--seq", "1", str(job.pk), "-o", str(tmp_path / "one"))
    assert one.exit_code == 0 and os.listdir(tmp_path / "one") == ["step"]
    missing = euler("download", "--checkpoint", "--seq", "9", str(job.pk), "-o", str(tmp_path / "none"))
    assert missing.exit_code != 0 and "no committed checkpoint" in missing.output
