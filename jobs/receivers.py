"""Receivers for node signals: a node offline loses its attempts; a node available is worth a pass."""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


def on_node_offline(sender, node_id: int, **kwargs) -> None:
    from jobs import attempts

    # Called after the node's commit, in the process that marked it offline: settle at once, the sweep backs it up.
    attempts.node_lost(node_id=node_id)


def on_node_available(sender, node_id: int, **kwargs) -> None:
    from jobs import wakeups

    wakeups.request_pass()


def on_node_reclaimed(sender, node_id: int, grace: int | None, by: str, **kwargs) -> int:
    from jobs import stopping

    # In the reclaim's transaction: every running attempt there is stopped with its grace and requeued, no retry spent.
    return stopping.stop_node_attempts(
        node_id=node_id, reason=stopping.Reason.RECLAIM, requeue=True, count_as_failure=False, by=by, grace=grace
    )
