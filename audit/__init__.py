"""The audit trail: who did what, recorded by one function that services call inside their transaction."""

from __future__ import annotations


def record(action: str, **kwargs):
    """Record one AuditEvent (see audit.services.record); importable before the app registry is ready."""
    from audit.services import record as _record

    return _record(action, **kwargs)
