"""Retention of audit events: once EULER_AUDIT_RETENTION_DAYS old (registered with euler.retention, run by beat)."""

from __future__ import annotations

from datetime import datetime

from audit.models import AuditEvent
from euler.retention import purge_batches


def purge_audit_events(*, before: datetime, batch: int) -> int:
    old = AuditEvent.objects.filter(created_at__lt=before)
    return purge_batches(old, batch, lambda ids: AuditEvent.objects.filter(pk__in=ids).purge())
