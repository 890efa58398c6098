"""Signals other apps listen to; both are sent after the transaction commits, with `node_id=`."""

from __future__ import annotations

from django.db import transaction
from django.dispatch import Signal

node_offline = Signal()  # a node was marked offline: its attempts are lost
node_available = Signal()  # approved, undrained, back online, or its capacity changed: worth a scheduling pass


def send_on_commit(signal: Signal, node_id: int) -> None:
    from nodes.models import Node

    transaction.on_commit(lambda: signal.send(sender=Node, node_id=node_id))
