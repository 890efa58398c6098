"""Signals other apps listen to, with `node_id=`: node_offline and node_available are sent after the transaction
commits; node_reclaimed inside it (its receiver's stops commit or roll back with the reclaim)."""

from __future__ import annotations

from django.db import transaction
from django.dispatch import Signal

node_offline = Signal()  # a node was marked offline: its attempts are lost
node_available = Signal()  # approved, undrained, back online, or its capacity changed: worth a scheduling pass
# Its lender (or the operator) took it back: stop its running attempts with `grace=` (None: each job's), `by=`.
node_reclaimed = Signal()


def send_on_commit(signal: Signal, node_id: int) -> None:
    from nodes.models import Node

    transaction.on_commit(lambda: signal.send(sender=Node, node_id=node_id))
