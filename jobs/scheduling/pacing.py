"""How many attempts a scheduling pass may hand over now (pure; the cycle reads the live figures)."""

from __future__ import annotations


def handover_allowance(*, window: int, web_processes: int, outstanding: int) -> int | None:
    """How many attempts a scheduling pass may hand over now; None: no limit (`window` 0).

    Handed over but not started, an attempt still costs the web tier its wake-up, its poll answer and its start
    report, and a finished one its end report: placing a 20,000-job queue on 10,000 idle nodes at once would
    queue that work, and the nodes' heartbeats behind it, faster than the web processes answer. So at most
    `window` attempts per live web process are handed over and not yet started; each start frees a place. The
    pace thus follows what the web tier actually answers (a slower tier starts attempts later), like a
    sliding window."""
    if window <= 0:
        return None
    return max(0, window * max(web_processes, 1) - outstanding)
