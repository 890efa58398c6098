"""The collector's pauses are timed: a histogram per generation, and a warning for a long one."""

import gc
import logging

from euler import gcwatch, metrics


def test_every_collection_is_timed_and_a_long_one_is_logged(monkeypatch, caplog):
    gcwatch.install()
    gcwatch.install()  # idempotent
    try:
        assert gc.callbacks.count(gcwatch._callback) == 1
        metrics._pending.clear()
        gc.collect()
        observed = [(name, labels) for name, _, labels in list(metrics._pending) if name == "euler_gc_pause_seconds"]
        assert ("euler_gc_pause_seconds", '{generation="2"}') in observed

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
