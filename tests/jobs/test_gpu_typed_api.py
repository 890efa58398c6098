"""Typed GPU requests through the API and a real scheduling pass (PostgreSQL): accepted, refused, placed."""

from __future__ import annotations

import pytest

from jobs.models import Attempt, Job

from .conftest import seed_body

pytestmark = pytest.mark.django_db

GIB = 1024**3


def gpu(i, model, gib, healthy=True) -> dict:
    return {"uuid": f"GPU-{model[:4]}-{i}", "index": i, "model": model, "memory_bytes": gib * GIB, "healthy": healthy}


def test_a_typed_request_is_stored_and_shown_as_asked(api):
    body = seed_body(gpus={"count": 2, "model": "A100*", "min_memory_gib": 40})
    del body["gpu_count"]
    r = api.post("/api/v1/jobs", body, format="json")
    assert r.status_code == 201, r.json()
    out = r.json()
    assert out["gpu_count"] == 2 and out["gpus"] == {"count": 2, "model": "A100*", "min_memory_gib": 40.0}
    job = Job.objects.get(pk=out["id"])
    assert (job.gpu_model, job.gpu_min_memory_bytes) == ("A100*", 40 * GIB)


def test_an_integer_gpus_is_today_s_count(api):
    body = seed_body(gpus=1)
    del body["gpu_count"]
    out = api.post("/api/v1/jobs", body, format="json").json()
    assert out["gpus"] == {"count": 1, "model": "", "min_memory_gib": 0.0}


@pytest.mark.parametrize(
    ("gpus", "code"),
    [
        ({"count": 2, "model": "A100;*"}, "invalid_gpu_model"),
        ({"count": 2, "min_memory_gib": "lots"}, "invalid_gpu_memory"),
        ({"model": "A100*"}, "invalid_gpus"),
        ("two", "invalid_gpus"),
    ],
)
def test_a_bad_typed_request_answers_400_with_its_code(api, gpus, code):
    body = seed_body(gpus=gpus)
    del body["gpu_count"]
    r = api.post("/api/v1/jobs", body, format="json")
    assert r.status_code == 400 and r.json()["code"] == code


def test_gpus_beside_gpu_count_answers_400_conflicting_gpus(api):
    r = api.post("/api/v1/jobs", seed_body(gpus={"count": 1}), format="json")
    assert r.status_code == 400 and r.json()["code"] == "conflicting_gpus"


def typed(api, gpus) -> int:
    body = seed_body(gpus=gpus)
    del body["gpu_count"]
    r = api.post("/api/v1/jobs", body, format="json")
    assert r.status_code == 201, r.json()
    return r.json()["id"]


def test_a_pass_places_a_typed_job_on_matching_healthy_gpus_only(api, make_node, schedule):
    t4 = make_node("t4-box", cpu_milli=64000)
    t4.gpus = [gpu(i, "Tesla T4", 15) for i in range(4)]
    t4.save()
    a100 = make_node("a100-box", cpu_milli=64000)
    a100.gpus = [gpu(0, "NVIDIA A100-SXM4-80GB", 80, healthy=False), gpu(1, "NVIDIA A100-SXM4-80GB", 80),
                 gpu(2, "NVIDIA A100-SXM4-80GB", 80)]  # fmt: skip
    a100.save()
    first = typed(api, {"count": 2, "model": "A100*", "min_memory_gib": 40})
    second = typed(api, {"count": 1, "model": "a100*"})
    schedule()
    job = Job.objects.get(pk=first)
    assert job.state == "assigned" and job.current_attempt.node_id == a100.pk
    assert job.current_attempt.gpu_uuids == ["GPU-NVID-1", "GPU-NVID-2"]  # GPU 0 is unhealthy: never offered
    waiting = Job.objects.get(pk=second)
    assert waiting.state == "queued"
    assert waiting.pending_reason == "no node fits: 2 lack 1 free GPU matching a100*"
    assert not Attempt.objects.filter(gpu_uuids__contains=["GPU-NVID-0"]).exists()
