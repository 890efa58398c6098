"""The usage ledger: atomic additions to daily rows per project, resource and agent."""

from __future__ import annotations

from datetime import date

from django.db import IntegrityError, transaction
from django.db.models import F

from euler import writes
from quotas.models import UsageEntry


def ledger_add(*, project_id: int, resource: str, amount: float, day: date, agent_name: str = "") -> None:
    """Add `amount` to the day's row, creating it when missing; safe under concurrency."""
    if amount <= 0:
        return
    filters = {"project_id": project_id, "day": day, "resource": resource, "agent_name": agent_name}
    # Every metering of every attempt adds here: its UPDATE built once (euler/writes.py).
    if writes.update_where(UsageEntry, None, {}, add={"amount": amount}, **filters):
        return
    try:
        with transaction.atomic():
            UsageEntry.objects.create(amount=amount, **filters)
    except IntegrityError:
        # Another writer created the row between our UPDATE and INSERT.
        UsageEntry.objects.filter(**filters).update(amount=F("amount") + amount)
