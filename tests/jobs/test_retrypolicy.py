"""The retry policy, pure: exit codes and ranges, the stored form, why a retry happens, backoff with jitter."""

from __future__ import annotations

import pytest

from jobs.retrypolicy import (
    Backoff,
    PolicyError,
    backoff_delay,
    normalize_retry_on,
    parse_backoff,
    parse_exit_codes,
    retry_reason,
)


def test_exit_codes_and_ranges_are_merged_and_sorted():
    assert parse_exit_codes([75, "128-143", "130-150", 1, "2"]) == [(1, 2), (75, 75), (128, 150)]


@pytest.mark.parametrize(
    "bad", [[], [256], [-1], ["143-128"], ["a-b"], ["1-2-3"], [True], [1.5], [None], "75", [{"x": 1}]]
)
def test_bad_exit_codes_are_refused_with_a_code(bad):
    with pytest.raises(PolicyError) as exc:
        parse_exit_codes(bad)
    assert exc.value.code == "invalid_exit_codes"


def test_retry_on_keeps_endings_in_order_and_one_exit_code_entry():
    assert normalize_retry_on(["failed", "lost", "lost", {"exit_codes": ["128-143", 75]}]) == [
        "lost",
        "failed",
        {"exit_codes": [75, "128-143"]},
    ]
    for bad in (["sometimes"], [{"exit_codes": [1]}, {"exit_codes": [2]}], [{"codes": [1]}], "lost"):
        with pytest.raises(PolicyError) as exc:
            normalize_retry_on(bad)
        assert exc.value.code == "invalid_retry_on"


def test_an_exit_code_in_the_list_is_retried_and_says_which_entry_matched():
    retry_on = ["lost", {"exit_codes": [75, "128-143"]}]
    assert retry_reason(retry_on=retry_on, category="failed", reason="exited", exit_code=75) == (
        "exit code 75 matched 75"
    )
    assert retry_reason(retry_on=retry_on, category="failed", reason="exited", exit_code=137) == (
        "exit code 137 matched 128-143"
    )
    assert retry_reason(retry_on=retry_on, category="failed", reason="exited", exit_code=1) is None
    assert retry_reason(retry_on=retry_on, category="lost", reason="lost", exit_code=None) == "lost"
    # a timeout or an out-of-memory kill is not an exit code the job chose
    assert retry_reason(retry_on=retry_on, category="timeout", reason="timeout", exit_code=137) is None
    assert retry_reason(retry_on=retry_on, category="failed", reason="oom", exit_code=137) is None
    assert retry_reason(retry_on=retry_on, category=None, reason="exited", exit_code=0) is None
    assert retry_reason(retry_on=["failed"], category="failed", reason="oom", exit_code=137) == "failed"


def test_backoff_grows_by_its_factor_up_to_its_max_less_jitter():
    b = Backoff(initial=1.0, factor=3.0, max=20.0)
    assert [backoff_delay(retry_number=n, backoff=b, u=0.0) for n in (1, 2, 3, 4)] == [1.0, 3.0, 9.0, 20.0]
    assert backoff_delay(retry_number=2, backoff=b, u=0.999999) == pytest.approx(2.4, abs=0.001)
    for u in (0.0, 0.3, 0.9999):
        assert 16.0 <= backoff_delay(retry_number=40, backoff=b, u=u) <= 20.0  # never past max


def test_backoff_settings_fill_from_the_defaults_and_are_checked():
    default = Backoff(2.0, 2.0, 300.0)
    assert parse_backoff(None, default=default) == default
    assert parse_backoff({"initial": 5}, default=default) == Backoff(5.0, 2.0, 300.0)
    assert parse_backoff({"initial": 600}, default=default) == Backoff(600.0, 2.0, 600.0)
    for bad in ({"initial": -1}, {"factor": 0.5}, {"max": "1"}, {"initial": 10, "max": 5}, {"x": 1}, [1]):
        with pytest.raises(PolicyError) as exc:
            parse_backoff(bad, default=default)
        assert exc.value.code == "invalid_retry_backoff"
