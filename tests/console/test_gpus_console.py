"""The console shows a typed GPU request, each attempt's GPU figures, and a node's unhealthy GPU with why."""

import pytest
from django.utils import timezone

from jobs.models import Attempt, Job

pytestmark = pytest.mark.django_db

GIB = 1 << 30


def test_the_job_page_shows_the_typed_request_and_the_gpu_figures_beside_the_attempt(signed_in, project):
    job = Job.objects.create(project=project, name="train", image="img", command=["true"], cpu_milli=500,
                             memory_bytes=GIB, gpu_count=2, gpu_model="A100*", gpu_min_memory_bytes=40 * GIB,
                             timeout_seconds=60, queued_at=timezone.now(), state="lost", reason="gpu_error")  # fmt: skip
    Attempt.objects.create(job=job, number=1, cpu_milli=500, memory_bytes=GIB, gpu_uuids=["GPU-a"], state="lost",
                           reason="gpu_error", message="GPU 0 (GPU-a) failed: XID 79",
                           gpu_stats=[{"uuid": "GPU-a", "samples": 3, "utilization_avg": 87.5, "utilization_max": 100,
                                       "memory_peak_bytes": 30 * GIB, "memory_source": "process"}])  # fmt: skip
    body = signed_in.get(f"/jobs/{job.pk}/").content.decode()
    assert "2 GPU × A100* ≥ 40 GiB" in body
    assert "87.5% busy on average, 100% at most" in body and "peak memory 30 GiB (process)" in body
    assert "GPU 0 (GPU-a) failed: XID 79" in body


def test_the_nodes_page_shows_an_unhealthy_gpu_and_why(signed_in, project):
    from nodes.models import Node

    Node.objects.create(name="gpu-box", owner_project=project, approval="approved", online=True, cpu_milli=2000,
                        memory_bytes=4 * GIB, gpus=[
                            {"uuid": "GPU-a", "index": 0, "model": "NVIDIA A10", "memory_bytes": 24 * GIB},
                            {"uuid": "GPU-b", "index": 1, "model": "NVIDIA A10", "memory_bytes": 24 * GIB,
                             "healthy": False, "health_reason": "XID 48"}])  # fmt: skip
    body = signed_in.get("/nodes/").content.decode()
    assert 'data-gpu-unhealthy="GPU-b"' in body and "GPU 1 unhealthy" in body and "XID 48" in body
    assert 'data-gpu-unhealthy="GPU-a"' not in body


FORM = {"name": "train", "image": "euler-test/busybox", "command": "true", "cpu_cores": "1", "memory_mib": "64",
        "gpu_count": "2", "timeout_seconds": "60", "max_retries": "1", "retry_on": ["lost"]}  # fmt: skip


def test_the_form_sends_a_typed_gpu_request(signed_in, project):
    signed_in.post("/jobs/new/", {**FORM, "gpu_model": "A100*", "gpu_min_memory_gib": "40"})
    job = Job.objects.get(name="train")
    assert (job.gpu_count, job.gpu_model, job.gpu_min_memory_bytes) == (2, "A100*", 40 * GIB)


def test_the_form_shows_the_apis_message_for_a_bad_gpu_model(signed_in, project):
    body = signed_in.post("/jobs/new/", {**FORM, "gpu_model": "A100; rm"}).content.decode()
    assert "gpus.model is a glob" in body and not Job.objects.exists()
