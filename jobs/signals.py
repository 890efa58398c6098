"""Signals other apps listen to about jobs; sent inside the transaction that made the change."""

from __future__ import annotations

from django.dispatch import Signal

# An attempt ended (once: only the call that moved it out of its active state sends this), with `attempt_id=`
# and `now=`. Sent in the ending's transaction, so a receiver's rows commit or roll back with the ending.
attempt_ended = Signal()

# Job events were written: sent after the writing transaction commits (transitions.events_written_on_commit), with
# no arguments, possibly once per event. Receivers must be cheap (the webhook dispatcher's nudge debounces).
events_written = Signal()
