"""quotas.api.base.FieldsOnce: fields built once per class and copied per instance. The copy must give the same
representation as DRF's own (every field deep-copied), and no two instances may share a bound field: binding sets
the field's parent, and a SerializerMethodField calls its method on that parent."""

from __future__ import annotations

import copy

import pytest
from django.utils import timezone

from jobs.api.serializers import JobDetailSerializer, JobSerializer
from jobs.models import Attempt, Job, JobEvent
from quotas.api import base

pytestmark = pytest.mark.django_db


def _job(project) -> Job:
    now = timezone.now()
    job = Job.objects.create(project=project, name="t", image="alpine:3.20", command=["true"], cpu_milli=500,
                             memory_bytes=256 << 20, timeout_seconds=60, state="succeeded", queued_at=now,
                             ended_at=now)  # fmt: skip
    attempt = Attempt.objects.create(job=job, number=1, node_name="n1", cpu_milli=500, memory_bytes=256 << 20,
                                     state="succeeded", started_at=now, ended_at=now, exit_code=0)  # fmt: skip
    job.current_attempt = attempt
    job.save(update_fields=["current_attempt"])
    for to in ("assigned", "running", "succeeded"):
        JobEvent.objects.create(job=job, attempt=attempt, from_state="", to_state=to)
    return Job.objects.prefetch_related("attempts", "events", "dependencies").get(pk=job.pk)


def test_a_job_reads_the_same_as_with_every_field_deep_copied(project, monkeypatch):
    job = _job(project)
    ours = JobDetailSerializer(job).data
    monkeypatch.setattr(base, "_copy_field", copy.deepcopy)  # DRF's own way: each field made again from its arguments
    assert JobDetailSerializer(job).data == ours
    assert ours["attempts"][0]["exit_code"] == 0 and [e["to_state"] for e in ours["events"]] == [
        "assigned",
        "running",
        "succeeded",
    ]


def test_two_serializers_never_share_a_bound_field(project):
    job = _job(project)
    one, two = JobDetailSerializer(job), JobSerializer([job, job], many=True)
    first, second = one.fields, JobDetailSerializer(job).fields
    assert all(first[name] is not second[name] for name in first)
    assert all(field.parent is one for field in first.values())
    nested = first["attempts"].child.fields, second["attempts"].child.fields
    assert all(nested[0][name] is not nested[1][name] for name in nested[0])
    assert len(two.data) == 2 and two.data[0] == two.data[1]
    # The class keeps its built fields unbound: nothing an instance did reached them.
    assert all(getattr(field, "parent", None) is None for field in JobDetailSerializer._fields_once.values())
