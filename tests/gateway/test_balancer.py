from collections import Counter

from gateway.balancer import pick


def run(peers, rounds):
    scores, chosen = {}, []
    for _ in range(rounds):
        peer, scores = pick(peers, scores)
        chosen.append(peer)
    return chosen


def test_it_picks_each_peer_as_often_as_its_weight():
    assert Counter(run([("a", 3), ("b", 1)], 1000)) == {"a": 750, "b": 250}


def test_it_interleaves_smoothly_like_nginx():
    assert run([("a", 5), ("b", 1), ("c", 1)], 7) == ["a", "a", "b", "a", "c", "a", "a"]


def test_a_peer_left_out_does_not_skew_the_others():
    scores = {}
    for _ in range(3):
        _, scores = pick([("a", 1), ("b", 1), ("c", 1)], scores)
    chosen = []
    for _ in range(4):
        peer, scores = pick([("a", 1), ("b", 1)], scores)
        chosen.append(peer)
    assert Counter(chosen) == {"a": 2, "b": 2}


def test_no_peer_gives_none():
    assert pick([], {}) == (None, {})
    assert pick([("a", 0)], {})[0] is None
