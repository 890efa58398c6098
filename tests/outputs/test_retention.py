"""Retention of outputs: its own schedule (EULER_OUTPUTS_RETENTION_DAYS) removes rows and stored files; a job
removed by job retention takes its stored files with it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.models import Job
from jobs.outputs import retention
from jobs.outputs.models import OutputFile
from tests.outputs.test_api import stored

pytestmark = pytest.mark.django_db


def _job(project, *, ended_days_ago: float) -> Job:
    ended = timezone.now() - timedelta(days=ended_days_ago)
    return Job.objects.create(project=project, name="old", image="euler-test/busybox", command=["true"], cpu_milli=1,
                              memory_bytes=64 << 20, timeout_seconds=60, state="succeeded", queued_at=ended,
                              ended_at=ended, outputs={"paths": ["/out"], "max_bytes": 100})  # fmt: skip


def test_outputs_past_their_retention_go_with_their_files(project, settings, outputs_store,
                                                          django_capture_on_commit_callbacks):  # fmt: skip
    settings.EULER_OUTPUTS_RETENTION_DAYS = 7
    settings.EULER_RETENTION_BATCH = 1
    old, recent = _job(project, ended_days_ago=8), _job(project, ended_days_ago=6)
    gone = [stored(old, "out/a", b"a"), stored(old, "out/b", b"b")]
    kept = stored(recent, "out/a", b"a")
    with django_capture_on_commit_callbacks(execute=True):
        assert retention.purge_expired() == 2
    assert list(OutputFile.objects.values_list("pk", flat=True)) == [kept.pk]
    assert not any((outputs_store / row.storage_key).exists() for row in gone)
    assert (outputs_store / kept.storage_key).exists()
    assert Job.objects.filter(pk=old.pk).exists()  # the job stays until job retention


def test_zero_keeps_them(project, settings):
    settings.EULER_OUTPUTS_RETENTION_DAYS = 0
    stored(_job(project, ended_days_ago=1000), "out/a", b"a")
    assert retention.purge_expired() == 0 and OutputFile.objects.count() == 1


def test_job_retention_removes_the_files_with_the_job(project, settings, outputs_store,
                                                      django_capture_on_commit_callbacks):  # fmt: skip
    from jobs.retention import purge_jobs

    row = stored(_job(project, ended_days_ago=40), "out/a", b"a")
    with django_capture_on_commit_callbacks(execute=True):
        purge_jobs(before=timezone.now() - timedelta(days=30), batch=10)
    assert not OutputFile.objects.exists() and not (outputs_store / row.storage_key).exists()
