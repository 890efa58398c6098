import random

from nodes.auth import address_allowed
from nodes.policy import (
    change_fingerprint,
    describe_gpu_change,
    gpu_fingerprint,
    heartbeat_interval,
    hooks_due,
    offline_window,
    overload_allowance,
    total_budget,
    validate_labels,
)


def _interval(n, **kw):
    args = {"min_interval": 5, "budget": 1000, "max_interval": 60, "jitter": 0, **kw}
    return heartbeat_interval(n, **args)


def test_the_interval_is_the_minimum_for_a_small_cluster():
    assert _interval(3) == 5


def test_the_interval_grows_with_the_node_count_to_bound_the_total_rate():
    assert _interval(10_000) == 10
    assert 10_000 / _interval(10_000) <= 1000


def test_more_web_budget_shortens_the_interval():
    assert _interval(20_000, budget=1000) == 20
    assert _interval(20_000, budget=2000) == 10


def test_the_interval_never_exceeds_the_maximum():
    assert _interval(1_000_000) == 60


def test_the_offline_window_is_several_of_the_nodes_own_intervals_when_that_is_longer():
    assert offline_window(5, offline_after=30, missed=3) == 30
    assert offline_window(20, offline_after=30, missed=3) == 60
    assert offline_window(None, offline_after=30, missed=3) == 30


def test_the_total_budget_counts_each_live_process_once():
    assert total_budget(["web-a|800", "web-b|1000", "web-a|900"], own=500) == 1900
    assert total_budget([], own=500) == 500
    assert total_budget(["junk"], own=500) == 500


def test_the_change_fingerprint_ignores_live_gpu_figures_and_the_time_but_not_capacity():
    gpu = {"uuid": "GPU-a", "index": 0, "model": "H100", "memory_bytes": 1, "utilization": 5.0}
    base = {"cpu_milli": 1000, "gpus": [gpu], "online": True, "last_heartbeat_at": 1}
    busy = {**base, "gpus": [{**gpu, "utilization": 99.0, "memory_used_bytes": 7}], "last_heartbeat_at": 2}
    assert change_fingerprint(base) == change_fingerprint(busy)
    assert change_fingerprint(base) != change_fingerprint({**base, "cpu_milli": 2000})
    assert change_fingerprint(base) != change_fingerprint({**base, "disk_bytes": 10})  # a new field folds in


def test_hooks_run_when_the_work_changed_or_asked_again_or_now_and_then():
    due = {"running_changed": False, "last_run": 100.0, "now": 110.0, "every": 30}
    assert not hooks_due(**due)
    assert hooks_due(**{**due, "running_changed": True})
    assert hooks_due(**{**due, "last_run": 0.0})
    assert hooks_due(**{**due, "now": 131.0})


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


def test_a_web_tier_on_time_gives_no_extra_silence():
    assert overload_allowance(lag=0.2, intake_rate=10, expected_rate=1000, cap=90) == 0


def test_a_web_tier_behind_gives_every_node_twice_its_lag_up_to_the_cap():
    assert overload_allowance(lag=5, intake_rate=900, expected_rate=1000, cap=90) == 10
    assert overload_allowance(lag=60, intake_rate=900, expected_rate=1000, cap=90) == 90


def test_a_web_tier_behind_and_taking_far_less_than_the_nodes_send_holds_offline_marking_up_to_the_cap():
    assert overload_allowance(lag=2, intake_rate=100, expected_rate=1000, cap=90) == 90
    assert overload_allowance(lag=2, intake_rate=100, expected_rate=0, cap=90) == 4  # nothing expected: the lag
