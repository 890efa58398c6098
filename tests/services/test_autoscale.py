"""Autoscaling decisions (services/autoscale.py): pure, over samples of calls in flight."""

from services.autoscale import Policy, decide, retention

P = Policy(low=1, high=4, target=2, up_window=10, down_window=60)
Z = Policy(low=0, high=4, target=2, up_window=10, down_window=60, zero_after=30)


def held(n, start, end, every=2.0):
    t, out = start, []
    while t <= end:
        out.append((t, n))
        t += every
    return out


def test_a_fixed_count_is_kept_whatever_the_load():
    assert decide(3, held(100, 0, 10), 10, Policy(low=3, high=3, target=1, up_window=10, down_window=60)) == 3


def test_three_times_the_target_scales_one_to_three():
    assert decide(1, held(6, 0, 10), 10, P) == 3


def test_scale_up_is_capped_by_max():
    assert decide(1, held(100, 0, 10), 10, P) == 4


def test_a_short_burst_in_the_long_window_does_not_scale_up_when_the_short_mean_is_low():
    samples = held(0, 0, 50) + [(52.0, 6)] + held(0, 54, 60)
    assert decide(1, samples, 60, P) == 1


def test_scale_down_waits_for_the_long_window():
    samples = held(6, 0, 10) + held(0, 12, 40)
    assert decide(3, samples, 40, P) == 3  # only 40 s of history: the long window is not covered
    samples = held(0, 0, 70)
    assert decide(3, samples, 70, P) == 1


def test_scale_down_keeps_what_the_peak_of_the_long_window_needs():
    samples = held(0, 0, 70)
    samples[-10] = (samples[-10][0], 4)  # a peak of 4 in flight inside the long window: 2 replicas
    assert decide(3, samples, 70, P) == 2


def test_never_below_min_nor_below_one_without_scale_to_zero():
    assert decide(2, held(0, 0, 100), 100, Policy(low=0, high=4, target=2, up_window=10, down_window=60)) == 1
    assert decide(3, held(0, 0, 100), 100, Policy(low=2, high=4, target=2, up_window=10, down_window=60)) == 2


def test_scale_to_zero_after_the_idle_time_and_back_on_the_first_call():
    assert decide(1, held(0, 0, 20), 20, Z) == 1  # idle for 20 s of 30
    assert decide(1, held(0, 0, 40), 40, Z) == 0
    assert decide(0, held(0, 0, 40) + [(42.0, 1)], 42, Z) == 1  # a held call wakes it
    assert decide(0, held(0, 0, 42), 42, Z) == 0


def test_no_samples_keeps_the_count_within_range():
    assert decide(2, [], 0, P) == 2
    assert decide(9, [], 0, P) == 4


def test_samples_kept_for_the_retention_cover_the_longest_window():
    """The shell keeps samples for `retention` seconds: enough that the idle time to zero (here the longest window)
    is ever fully covered (it was not, with exactly the window kept, and the service stayed at one)."""
    now = 1000.0
    kept = [(t, n) for t, n in held(0, 0, now, every=0.5) if now - t <= retention(Z)]
    assert decide(1, kept, now, Z) == 0
    down = Policy(low=1, high=4, target=2, up_window=10, down_window=60)
    kept = [(t, n) for t, n in held(0, 0, now, every=0.5) if now - t <= retention(down)]
    assert decide(3, kept, now, down) == 1
