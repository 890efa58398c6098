"""Signals other apps listen to; both are sent after the transaction commits, with `node_id=`."""

from __future__ import annotations

from django.db import transaction
from django.dispatch import Signal

node_offline = Signal()  # a node was marked offline: its attempts are lost
node_available = Signal()  # approved, undrained, back online, or its capacity changed: worth a scheduling pass


def send_on_commit(signal: Signal, node_id: int) -> None:
    from nodes.models import Node

    transaction.on_commit(lambda: signal.send(sender=Node, node_id=node_id))


def node_row_changed(sender, instance, **kwargs) -> None:
    """A service saved a node (approval, trust, draining, credential): web processes drop their cached copy, now
    and again after the commit (a heartbeat between the two may have cached the row as it was)."""
    from nodes import liveness, quickbeat

    def changed() -> None:
        quickbeat.invalidate([instance.pk])  # this process at once (a rotated credential stops working here now)
        liveness._bump_quietly(instance.pk)

    changed()
    transaction.on_commit(changed)


def node_row_deleted(sender, instance, **kwargs) -> None:
    from redis.exceptions import RedisError

    from nodes import livestore

    try:
        livestore.forget_node(instance.pk)
    except RedisError:
        pass  # its last-seen entry ages out
