"""Spread of a group's jobs (a service's replicas) across lenders, then nodes, where the pool allows (pure).

A job with a `spread_group` first tries the nodes whose lender hosts no active member of its group, then the
nodes that host none, and only then any node (the usual spread score decides within each tier). A lender is
the project that owns the node (community, untrusted) or the operator (every platform node): replicas on two
lenders survive one lender taking their machines back.
"""

from __future__ import annotations

from collections.abc import Iterable

from jobs.scheduling.snapshots import NodeSnapshot


def lender(node: NodeSnapshot) -> tuple:
    return ("project", node.owner_project_id) if node.owner_project_id is not None else ("platform",)


def avoid_tiers(hosting: Iterable[int], nodes: list[NodeSnapshot]) -> list[list[int]]:
    """Node indices to leave out, most first: the hosting nodes' lenders' nodes, then the hosting nodes."""
    hosting = set(hosting)
    if not hosting:
        return []
    lenders = {lender(n) for n in nodes if n.id in hosting}
    same_node = [i for i, n in enumerate(nodes) if n.id in hosting]
    same_lender = [i for i, n in enumerate(nodes) if lender(n) in lenders]
    return [same_lender, same_node] if len(same_lender) > len(same_node) else [same_node]
