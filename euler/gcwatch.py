"""The garbage collector's pauses in a web process: a histogram, and a warning line for a long one.

A web process holding thousands of long-polls keeps millions of objects alive, and a full (generation 2)
collection walks all of them while the event loop waits. `install()` times every collection through
`gc.callbacks`; `/metrics` shows `euler_gc_pause_seconds{generation=…}` and the log says when one pause
passed WARN_SECONDS, so that a heartbeat latency spike can be told from the collector's.
"""

from __future__ import annotations

import atexit
import gc
import logging
import sys
import time

from euler import metrics

log = logging.getLogger(__name__)

WARN_SECONDS = 0.1

_started: list[float] = [0.0]


def _callback(phase: str, info: dict) -> None:
    if sys.is_finalizing():  # the collections of the interpreter's own exit: nothing is left to report to
        return
    if phase == "start":
        _started[0] = time.perf_counter()
        return
    took = time.perf_counter() - _started[0]
    generation = info.get("generation", 0)
    metrics.observe("euler_gc_pause_seconds", took, generation=str(generation))
    if took >= WARN_SECONDS:
        log.warning(
            "garbage collection (generation %s) paused this process for %.0f ms (%d objects collected)",
            generation,
            took * 1000,
            info.get("collected", 0),
        )


def install() -> None:
    """Idempotent: one callback per process."""
    if _callback not in gc.callbacks:
        gc.callbacks.append(_callback)
        atexit.register(uninstall)


def uninstall() -> None:
    """At exit: the collections of the interpreter's shutdown must not start the metrics flusher thread (a
    thread started then never runs, and its start() waited forever: pytest and the web hung at exit)."""
    if _callback in gc.callbacks:
        gc.callbacks.remove(_callback)


def tune(full_after: int) -> None:
    """For a web process once it has started: full collections rarer (`full_after` generation-1 collections
    between two looks, besides Python's own rule that the long-lived objects grew by a quarter; 0 keeps
    Python's default), and what start-up built (modules, Django, the URL conf) frozen out of every later
    collection. Cycles still die young in generations 0 and 1; what survives into the oldest generation
    waits longer for its collection."""
    if full_after > 0:
        first, second, _ = gc.get_threshold()
        gc.set_threshold(first, second, full_after)
    gc.collect()
    gc.freeze()
