"""Webhook event names, pure: each job event is `job.<state it moved to>`; a hook subscribes to names or groups."""

from __future__ import annotations

# `waiting` is the job arrays' and dependencies' state (unmet dependencies, a full array): listed so that a hook
# may choose it once that lands; `job.state_changed` matches every state, including any added later.
STATES = ("waiting", "queued", "assigned", "running", "succeeded", "failed", "cancelled", "lost")
TERMINAL = frozenset({"succeeded", "failed", "cancelled", "lost"})
NAMES = tuple(f"job.{state}" for state in STATES)
GROUPS = {
    "job.state_changed": frozenset(STATES),  # every move, submission included
    "job.ended": TERMINAL,
}
ALLOWED = frozenset(NAMES) | frozenset(GROUPS)


class EventError(ValueError):
    code = "invalid_events"


def normalize(value) -> list[str]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise EventError("events is a non-empty list of event names: " + ", ".join(sorted(ALLOWED)) + ".")
    unknown = sorted(set(value) - ALLOWED)
    if unknown:
        raise EventError(f"unknown event {unknown[0][:40]!r}; known: " + ", ".join(sorted(ALLOWED)) + ".")
    return sorted(set(value))


def event_type(to_state: str) -> str:
    return f"job.{to_state}"


def matches(subscribed, to_state: str) -> bool:
    for name in subscribed or ():
        if name in (event_type(to_state), "job.state_changed") or to_state in GROUPS.get(name, ()):
            return True
    return False


def payload(*, event_id: int, project: str, job: dict, event: dict, created_at: str) -> dict:
    """The JSON body: Stripe-like envelope, the job's summary and the transition."""
    return {
        "id": f"evt_{event_id}",
        "type": event_type(event["to_state"]),
        "created_at": created_at,
        "project": project,
        "data": {"job": job, "event": event},
    }
