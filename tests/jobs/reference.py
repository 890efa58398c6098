"""The ORM's own forms of reads that the project runs built once (euler/prepared.py): what they must equal
(tests/jobs/test_prepared.py) and what they are timed against (bench/prepared.py)."""

from __future__ import annotations


def job_read_by_orm(project, job_id: int):
    """A job's read as jobs.selectors.job_get made it before it was built once: the row and three prefetches."""
    from django.db.models import Prefetch

    from jobs.models import Attempt, Job, JobEvent

    return (
        Job.objects.filter(project=project, pk=job_id)
        .defer("env")
        .prefetch_related(
            Prefetch("attempts", queryset=Attempt.objects.order_by("number")),
            Prefetch("events", queryset=JobEvent.objects.order_by("created_at", "id")),
            "dependencies",
        )
        .first()
    )
