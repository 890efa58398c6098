"""Settings of the lending app (merged into the settings): only its periodic task."""

# Reliability scores are recomputed every five minutes from the ledger and the nodes' events (lending/reliability.py).
BEAT_SCHEDULE: dict = {
    "lending-refresh-reliability": {"task": "lending.tasks.refresh_reliability", "schedule": 300.0},
}
