"""An attempt ended by a GPU fault (`gpu_error`) counts as lost; an attempt's GPU figures are stored and shown."""

from __future__ import annotations

import pytest

from jobs.models import Attempt, Job

from .test_lifecycle import node_client, placed, report  # noqa: F401

pytestmark = pytest.mark.django_db

GIB = 1 << 30
STATS = [{"uuid": "GPU-x", "samples": 12, "utilization_avg": 87.5, "utilization_max": 100, "memory_peak_bytes": 30 * GIB,
          "memory_source": "process"}]  # fmt: skip
MESSAGE = "GPU 0 (GPU-x) failed: XID 79; the job was stopped and counts as lost"


def test_a_gpu_error_is_retried_under_retry_on_lost_with_its_reason_kept(placed, node_client, api):  # noqa: F811
    job_id, attempt, node, cred = placed(gpu_count=0, retry_on=["lost"], max_retries=1)
    report(node_client, cred, attempt.pk, state="running")
    r = report(node_client, cred, attempt.pk, state="ended", reason="gpu_error", exit_code=137, message=MESSAGE,
               gpu_stats=STATS)  # fmt: skip
    assert r.status_code == 200, r.json()
    ended = Attempt.objects.get(pk=attempt.pk)
    assert (ended.state, ended.reason, ended.message) == ("lost", "gpu_error", MESSAGE)
    job = Job.objects.get(pk=job_id)
    assert job.state == "queued" and job.retries_used == 1
    shown = api.get(f"/api/v1/jobs/{job_id}").json()["attempts"][0]
    assert shown["reason"] == "gpu_error" and shown["gpu_stats"] == STATS


def test_a_gpu_error_without_retries_left_ends_the_job_lost_saying_gpu_error(placed, node_client):  # noqa: F811
    job_id, attempt, node, cred = placed(max_retries=0)
    report(node_client, cred, attempt.pk, state="ended", reason="gpu_error", exit_code=None, message=MESSAGE)
    job = Job.objects.get(pk=job_id)
    assert (job.state, job.reason) == ("lost", "gpu_error")


def test_a_gpu_error_is_not_retried_when_retry_on_leaves_out_lost(placed, node_client):  # noqa: F811
    job_id, attempt, node, cred = placed(retry_on=["failed"], max_retries=3)
    report(node_client, cred, attempt.pk, state="ended", reason="gpu_error", message=MESSAGE)
    assert Job.objects.get(pk=job_id).state == "lost"


def test_bad_gpu_figures_are_refused_with_a_400(placed, node_client):  # noqa: F811
    job_id, attempt, node, cred = placed()
    r = report(node_client, cred, attempt.pk, state="ended", reason="exited", exit_code=0,
               gpu_stats=[{"uuid": "GPU-x", "utilization_avg": 140}])  # fmt: skip
    assert r.status_code == 400
