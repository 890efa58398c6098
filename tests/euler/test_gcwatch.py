"""The collector's pauses are timed: a histogram per generation, and a warning for a long one."""

import gc
import logging

from euler import gcwatch, metrics


def test_every_collection_is_timed_and_a_long_one_is_logged(monkeypatch, caplog):
    # The observations are caught as gcwatch makes them, not read back from metrics._pending: the metrics
    # flusher thread drains that queue every second, and a full collection in a loaded test worker takes
    # hundreds of ms, so a read after gc.collect() found it already emptied (make test, 2026-12-06).
    observed = []
    monkeypatch.setattr(metrics, "observe", lambda name, seconds, **labels: observed.append((name, labels)))
    gcwatch.install()
    gcwatch.install()  # idempotent
    try:
        assert gc.callbacks.count(gcwatch._callback) == 1
        gc.collect()
        assert ("euler_gc_pause_seconds", {"generation": "2"}) in observed
        assert "euler_gc_pause_seconds" in metrics.HISTOGRAMS  # what the real observe() would look up

        monkeypatch.setattr(gcwatch, "WARN_SECONDS", 0.0)  # every pause is "long" now
        with caplog.at_level(logging.WARNING, logger="euler.gcwatch"):
            gc.collect()
        assert "garbage collection (generation 2) paused this process for" in caplog.text
    finally:
        gc.callbacks.remove(gcwatch._callback)


def test_a_web_process_freezes_its_start_up_and_collects_fully_less_often():
    before = gc.get_threshold()
    try:
        gcwatch.tune(12_345)
        assert gc.get_threshold() == (before[0], before[1], 12_345)
        assert gc.get_freeze_count() > 0  # the modules and settings: out of every later collection
        gcwatch.tune(0)  # 0 keeps the threshold
        assert gc.get_threshold()[2] == 12_345
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()
