"""Outputs of jobs that ended more than EULER_OUTPUTS_RETENTION_DAYS ago are removed, rows and stored files, in
batches of EULER_RETENTION_BATCH rows (one short transaction each). Job retention (euler/retention.py) removes
the rest with the job: the rows' delete signal takes the stored files in both cases (receivers.py)."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from jobs.outputs.models import OutputFile
from jobs.states import TERMINAL

log = logging.getLogger(__name__)


def purge_expired(now: datetime | None = None) -> int:
    days = settings.EULER_OUTPUTS_RETENTION_DAYS
    if days <= 0:
        return 0
    before = (now or timezone.now()) - timedelta(days=days)
    batch, total = settings.EULER_RETENTION_BATCH, 0
    old = OutputFile.objects.filter(job__state__in=TERMINAL, job__ended_at__lt=before)
    while True:
        with transaction.atomic():
            ids = list(old.order_by("pk").values_list("pk", flat=True)[:batch])
            for row in OutputFile.objects.filter(pk__in=ids):
                row.delete()  # one by one: each sends the signal that removes its stored file on commit
        total += len(ids)
        if len(ids) < batch:
            break
    if total:
        log.info("retention: removed %s output files", total)
    return total
