"""Reads of the audit trail: one project's events, newest first, filtered by action and time."""

from __future__ import annotations

from datetime import datetime

from audit.models import AuditEvent


def events_of(project, *, action: str | None = None, since: datetime | None = None, until: datetime | None = None):
    events = AuditEvent.objects.filter(project=project)
    if action:
        # "node." (ending in a dot) selects a family of actions; anything else is one action.
        events = events.filter(action__startswith=action) if action.endswith(".") else events.filter(action=action)
    if since is not None:
        events = events.filter(created_at__gte=since)
    if until is not None:
        events = events.filter(created_at__lt=until)
    return events.order_by("-created_at", "-id")
