"""The console's job page lists a job's checkpoints (time, attempt, reason, size, files, a download link) and its
last refusal; a job without a checkpoint has no such card."""

from __future__ import annotations

import pytest

from tests.checkpoints.conftest import manifest, take

pytestmark = pytest.mark.django_db


@pytest.fixture
def signed_in(client, owner):
    client.force_login(owner)
    return client


def test_the_job_page_lists_checkpoints_with_links_and_the_last_refusal(signed_in, project, node_and_credential,
                                                                       make_job, node_api):  # fmt: skip
    node, credential = node_and_credential
    job, attempt = make_job(project, node)
    client = node_api(credential)
    take(client, attempt.pk, {"step": b"1"})
    take(client, attempt.pk, {"step": b"2"}, reason="stop")
    manifest(client, attempt.pk, [], refused="more than 10000 files")
    body = signed_in.get(f"/jobs/{job.pk}/").content.decode()
    assert 'id="checkpoint-list"' in body
    assert f'href="/api/v1/jobs/{job.pk}/checkpoints/2/download"' in body
    assert f'href="/api/v1/jobs/{job.pk}/checkpoints/1/download"' in body
    assert "more than 10000 files" in body
    download = signed_in.get(f"/api/v1/jobs/{job.pk}/checkpoints/2/download")
    assert download.status_code == 200


def test_a_job_without_a_checkpoint_has_no_checkpoints_card(signed_in, project, node_and_credential, make_job):
    node, _ = node_and_credential
    job, _ = make_job(project, node, checkpoint=None)
    assert 'id="checkpoints"' not in signed_in.get(f"/jobs/{job.pk}/").content.decode()
