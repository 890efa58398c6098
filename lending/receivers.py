"""Receivers: an ended attempt writes its ledger entry in the ending's own transaction."""

from __future__ import annotations


def on_attempt_ended(sender, attempt_id: int, now, **kwargs) -> None:
    from lending import ledger

    ledger.record(attempt_id=attempt_id)
