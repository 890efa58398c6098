"""Checkpoints of jobs that ended more than EULER_OUTPUTS_RETENTION_DAYS ago are removed with the outputs' age
rule, in batches of EULER_RETENTION_BATCH jobs (one short transaction each): their rows and blobs (each blob row's
delete takes its stored bytes on commit, receivers.py). A job's deletion removes them too (CASCADE)."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from jobs.checkpoints.models import Checkpoint, CheckpointBlob
from jobs.states import TERMINAL

log = logging.getLogger(__name__)


def purge_expired(now: datetime | None = None) -> int:
    """Blobs removed."""
    days = settings.EULER_OUTPUTS_RETENTION_DAYS
    if days <= 0:
        return 0
    before = (now or timezone.now()) - timedelta(days=days)
    batch, total = settings.EULER_RETENTION_BATCH, 0
    old = CheckpointBlob.objects.filter(job__state__in=TERMINAL, job__ended_at__lt=before)
    while True:
        with transaction.atomic():
            jobs = list(old.order_by("job_id").values_list("job_id", flat=True).distinct()[:batch])
            Checkpoint.objects.filter(job_id__in=jobs).delete()
            blobs = list(CheckpointBlob.objects.filter(job_id__in=jobs))
            for blob in blobs:
                blob.delete()  # one by one: each sends the signal that removes its stored bytes on commit
        total += len(blobs)
        if len(jobs) < batch:
            break
    if total:
        log.info("retention: removed %s checkpoint blobs", total)
    return total
