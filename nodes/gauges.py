"""The nodes app's gauges for /metrics (registered with euler.metrics in NodesConfig.ready)."""

from __future__ import annotations


def node_gauges() -> list[str]:
    from nodes.models import Node

    online = Node.objects.filter(approval="approved", online=True).count()
    return [
        "# HELP euler_nodes_online Approved nodes online",
        "# TYPE euler_nodes_online gauge",
        f"euler_nodes_online {online}",
    ]
