"""Smooth weighted round robin (nginx's algorithm), pure: plain ids, weights and running scores."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping


def pick(
    peers: Iterable[tuple[Hashable, int]], current: Mapping[Hashable, int]
) -> tuple[Hashable | None, dict[Hashable, int]]:
    """The chosen peer and the new running scores.

    Each round every peer's score grows by its weight; the highest score wins and pays back the
    total. Over sum(weights) rounds each peer is chosen exactly `weight` times, interleaved
    (5:1:1 gives a a b a c a a, not a a a a a b c). Peers absent from `peers` are dropped from
    the scores, so removing or ejecting one never skews the others.
    """
    scores: dict[Hashable, int] = {}
    total = 0
    best = None
    best_score = 0
    for peer, weight in peers:
        if weight <= 0:
            continue
        score = current.get(peer, 0) + weight
        scores[peer] = score
        total += weight
        if best is None or score > best_score:
            best, best_score = peer, score
    if best is not None:
        scores[best] -= total
    return best, scores
