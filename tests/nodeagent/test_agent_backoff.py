import logging
import random

from nodeagent.backoff import Backoff, Link


def test_backoff_grows_exponentially_up_to_the_cap_with_jitter():
    b = Backoff(base=1, cap=8, rng=random.Random(1))
    delays = [b.next_delay() for _ in range(20)]
    assert all(0.1 <= d <= 8 for d in delays)
    assert max(delays[:2]) <= 2 and max(delays[5:]) > 2
    b.reset()
    assert b.next_delay() <= 1


def test_the_link_logs_one_line_per_change_of_state_not_per_try(caplog):
    link = Link(logging.getLogger("test.link"))
    with caplog.at_level(logging.INFO, logger="test.link"):
        link.ok()
        for _ in range(5):
            link.failed("ConnectError")
        for _ in range(3):
            link.ok()
        link.failed("timeout")
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 3
    assert "unreachable (ConnectError)" in messages[0] and "reachable again" in messages[1]
