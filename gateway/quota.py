"""Invocation quota hook, called on every invoke; the quotas work fills it (atomic Redis counters).

May be a plain or an async function: the gateway awaits the result when it is awaitable.
"""

from __future__ import annotations


async def check_and_count(project_id: int) -> tuple[bool, int | None]:
    """Count one invocation for the project; (allowed, retry_after seconds when refused)."""
    return True, None
