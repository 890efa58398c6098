"""Invocation quota hook, called on every invoke: exact per-project counting in Redis (quotas.invocations)."""

from __future__ import annotations

from euler import metrics
from quotas import invocations


async def check_and_count(project_id: int, agent_name: str = "") -> tuple[bool, int | None]:
    """Count one invocation for the project; (allowed, retry_after seconds when refused)."""
    allowed, retry_after = await invocations.check_and_count(project_id, agent_name)
    if allowed:
        metrics.inc("euler_invocations_total")
    return allowed, retry_after
