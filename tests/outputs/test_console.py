"""The console's side of outputs: the job page lists the files with download links (session authentication) and
the truncation reason; the project's stored output bytes appear in its usage, in the API and on the usage page."""

from __future__ import annotations

import pytest
from django.utils import timezone

from jobs.models import Job
from tests.outputs.test_api import stored

pytestmark = pytest.mark.django_db


@pytest.fixture
def signed_in(client, owner):
    client.force_login(owner)
    return client


@pytest.fixture
def job(project):
    return Job.objects.create(project=project, name="train", image="euler-test/busybox", command=["true"],
                              cpu_milli=100, memory_bytes=64 << 20, timeout_seconds=60, state="succeeded",
                              queued_at=timezone.now(), outputs={"paths": ["/out"], "max_bytes": 1 << 30},
                              outputs_truncated=True, outputs_reason="1 output file(s) not kept: out/core (job_cap)")  # fmt: skip


def test_the_job_page_lists_outputs_with_links_and_says_what_was_not_kept(signed_in, job):
    stored(job, "out/model bin.pt", b"weights")
    body = signed_in.get(f"/jobs/{job.pk}/").content.decode()
    assert f'href="/api/v1/jobs/{job.pk}/outputs/out/model%20bin.pt"' in body
    assert f'href="/api/v1/jobs/{job.pk}/outputs.tar"' in body
    assert "out/core (job_cap)" in body
    download = signed_in.get(f"/api/v1/jobs/{job.pk}/outputs/out/model%20bin.pt")
    assert download.status_code == 200 and b"".join(download.streaming_content) == b"weights"


def test_a_page_without_outputs_declared_has_no_outputs_card(signed_in, job):
    Job.objects.filter(pk=job.pk).update(outputs=None, outputs_truncated=False)
    assert 'id="outputs"' not in signed_in.get(f"/jobs/{job.pk}/").content.decode()


def test_stored_output_bytes_show_in_the_project_usage(api, signed_in, job, project):
    from jobs.outputs.rules import FILE_CHARGE_MIN_BYTES

    stored(job, "out/a", b"x" * 10_000)
    stored(job, "out/empty", b"")  # counts the minimum charge of a file
    usage = api.get("/api/v1/project").json()["usage"]["output_bytes"]
    assert usage["used"] == 10_000 + FILE_CHARGE_MIN_BYTES and usage["limit"] == project.quota.output_bytes
    assert "Stored job outputs" in signed_in.get("/usage/").content.decode()
