"""Signals other apps listen to about jobs; sent inside the transaction that made the change."""

from __future__ import annotations

from django.dispatch import Signal

# An attempt ended (once: only the call that moved it out of its active state sends this), with `attempt_id=`
# and `now=`. Sent in the ending's transaction, so a receiver's rows commit or roll back with the ending.
attempt_ended = Signal()
