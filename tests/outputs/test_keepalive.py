"""The deadline backstop waits for outputs only while they make progress, and never past the upload allowance."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from jobs.attempts import deadlines_expire
from jobs.models import Attempt
from jobs.outputs.keepalive import moved_deadline, upload_allowance
from nodeagent import protocol
from tests.outputs.conftest import entry, file_url, plan, put_chunk

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def moved(*, deadline, now, started_at=T0, timeout=60, max_bytes=1000, grace=60, rate=100):
    return moved_deadline(deadline=deadline, started_at=started_at, timeout_seconds=timeout, max_bytes=max_bytes,
                          grace=grace, rate=rate, now=now)  # fmt: skip


def test_progress_moves_the_deadline_to_a_grace_from_now():
    now = T0 + timedelta(seconds=110)
    assert moved(deadline=T0 + timedelta(seconds=120), now=now) == now + timedelta(seconds=60)


def test_it_never_moves_past_the_cap_nor_backwards():
    # cap = started + timeout + grace + (grace + max_bytes / rate) = 0 + 60 + 60 + 60 + 10 = 190 s
    assert upload_allowance(max_bytes=1000, grace=60, rate=100) == 70
    cap = T0 + timedelta(seconds=190)
    assert moved(deadline=T0 + timedelta(seconds=180), now=T0 + timedelta(seconds=170)) == cap
    assert moved(deadline=cap, now=T0 + timedelta(seconds=180)) is None
    assert moved(deadline=T0 + timedelta(seconds=500), now=T0 + timedelta(seconds=100)) is None


def test_an_attempt_that_never_ran_gets_no_upload_time():
    assert moved(deadline=T0, now=T0, started_at=None) is None
    assert moved(deadline=None, now=T0) is None


# --- over the node protocol ---------------------------------------------------------------------------------------
@pytest.fixture
def near_deadline(project, node_and_credential, make_job, node_api, settings):
    """A job that ran to its timeout: the backstop is due in a second, and the agent is about to upload."""
    settings.EULER_JOB_TIMEOUT_GRACE = 60
    node, credential = node_and_credential
    job, attempt = make_job(project, node)
    now = timezone.now()
    Attempt.objects.filter(pk=attempt.pk).update(started_at=now - timedelta(seconds=job.timeout_seconds + 59),
                                                 deadline_at=now + timedelta(seconds=1))  # fmt: skip
    return job, attempt, node_api(credential)


def deadline(attempt) -> datetime:
    return Attempt.objects.get(pk=attempt.pk).deadline_at


@pytest.mark.django_db
def test_each_chunk_that_adds_bytes_pushes_the_backstop_and_nothing_else_does(near_deadline):
    job, attempt, client = near_deadline
    data = os.urandom(2000)
    before = deadline(attempt)
    upload = protocol.OutputsPlan.model_validate(plan(client, attempt.pk, [entry("out/m", data)]).json()).uploads[0]
    assert deadline(attempt) == before  # a manifest is no progress
    assert put_chunk(client, attempt.pk, upload.file_id, data[:1000], 0, len(data)).status_code == 200
    pushed = deadline(attempt)
    assert pushed > timezone.now() + timedelta(seconds=30)
    assert deadlines_expire(now=timezone.now() + timedelta(seconds=5)) == 0
    # No progress: the manifest again, the offset asked, the same chunk again (refused: the server holds it).
    plan(client, attempt.pk, [entry("out/m", data)])
    client.get(file_url(attempt.pk, upload.file_id))
    assert put_chunk(client, attempt.pk, upload.file_id, data[:1000], 0, len(data)).status_code == 409
    assert deadline(attempt) == pushed
    assert put_chunk(client, attempt.pk, upload.file_id, data[1000:], 1000, len(data)).json()["complete"] is True
    done = deadline(attempt)
    assert put_chunk(client, attempt.pk, upload.file_id, data[1000:], 1000, len(data)).status_code == 200
    assert deadline(attempt) == done  # a chunk to a complete file is no progress
    # Without progress the backstop still ends it.
    assert deadlines_expire(now=timezone.now() + timedelta(seconds=3600)) == 1


@pytest.mark.django_db
def test_uploads_cannot_push_the_backstop_past_the_allowance(near_deadline, settings):
    job, attempt, client = near_deadline
    settings.EULER_OUTPUTS_UPLOAD_RATE = 1 << 30  # the allowance is the grace (plus a second)
    started = Attempt.objects.get(pk=attempt.pk).started_at
    Attempt.objects.filter(pk=attempt.pk).update(started_at=started - timedelta(seconds=59 + job.stop_grace_seconds))
    # The running deadline waits for the timeout and the stop grace (jobs/stopping.py), then the grace, the allowance.
    cap = started - timedelta(seconds=59) + timedelta(seconds=job.timeout_seconds + 2 * 60 + 1)
    data = os.urandom(300)
    fid = plan(client, attempt.pk, [entry("out/m", data)]).json()["uploads"][0]["file_id"]
    for start in range(0, 300, 100):
        assert put_chunk(client, attempt.pk, fid, data[start : start + 100], start, 300).status_code == 200
        assert deadline(attempt) <= cap
    assert deadline(attempt) == cap
