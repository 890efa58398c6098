"""Retention of node events: once EULER_JOB_RETENTION_DAYS old (registered with euler.retention, run by beat)."""

from __future__ import annotations

from datetime import datetime

from euler.retention import purge_batches
from nodes.models import NodeEvent


def purge_node_events(*, before: datetime, batch: int) -> int:
    old = NodeEvent.objects.filter(created_at__lt=before)
    return purge_batches(old, batch, lambda ids: NodeEvent.objects.filter(pk__in=ids).delete())
