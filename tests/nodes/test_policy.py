import random

from nodes.auth import address_allowed
from nodes.policy import describe_gpu_change, gpu_fingerprint, heartbeat_interval, validate_labels


def _interval(n, **kw):
    args = {"min_interval": 5, "max_rate": 1000, "offline_after": 30, "jitter": 0, **kw}
    return heartbeat_interval(n, **args)


def test_the_interval_is_the_minimum_for_a_small_cluster():
    assert _interval(3) == 5


def test_the_interval_grows_with_the_node_count_to_bound_the_total_rate():
    assert _interval(10_000) == 10
    assert 10_000 / _interval(10_000) <= 1000


def test_the_interval_never_exceeds_half_the_offline_window():
    assert _interval(1_000_000) == 15


def test_jitter_only_shortens_the_interval_and_varies_it():
    rng = random.Random(4)
    values = {_interval(10, jitter=0.2, rng=rng) for _ in range(50)}
    assert len(values) > 10 and all(4 <= v <= 5 for v in values)


def test_the_https_rule_allows_only_the_configured_networks():
    nets = ("127.0.0.0/8", "::1/128")
    assert address_allowed("127.0.0.1", nets)
    assert address_allowed("::1", nets)
    assert address_allowed("::ffff:127.0.0.1", nets)
    assert not address_allowed("10.0.0.1", nets)
    assert not address_allowed("", nets)
    assert not address_allowed("not-an-ip", nets)
    assert address_allowed("10.1.2.3", ("10.0.0.0/8",))


def test_the_gpu_fingerprint_ignores_order_and_live_figures_but_not_the_set():
    a = {"uuid": "GPU-a", "index": 0, "model": "H100", "memory_bytes": 80}
    b = {"uuid": "GPU-b", "index": 1, "model": "H100", "memory_bytes": 80}
    assert gpu_fingerprint([a, b]) == gpu_fingerprint([{**b, "utilization": 50}, a])
    assert gpu_fingerprint([a]) != gpu_fingerprint([a, b])
    assert gpu_fingerprint([a]) != gpu_fingerprint([{**a, "model": "A10"}])


def test_a_gpu_change_is_described_in_one_line():
    a = {"uuid": "GPU-a", "model": "H100", "memory_bytes": 80}
    b = {"uuid": "GPU-b", "model": "A10", "memory_bytes": 24}
    assert describe_gpu_change([a], [b]) == "removed GPU-a (H100); added GPU-b (A10)"


def test_labels_are_validated():
    assert validate_labels({"zone": "a-1"}) is None
    assert validate_labels({"zone": "a b"})
    assert validate_labels({"": "x"})
    assert validate_labels({f"k{i}": "v" for i in range(65)})
    assert validate_labels(["x"])
