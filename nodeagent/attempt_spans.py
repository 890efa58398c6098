"""An attempt's start path, timed: named marks from the assignment's arrival, logged as spans in ms.

One log line when the `running` report returned (`start spans …`) and one when the `ended` report did (`end spans
…`); bench/start_spans.py reads them beside the engine's own create + start.
"""

from __future__ import annotations

import logging
import time


class Spans:
    def __init__(self) -> None:
        self.received_wall = time.time()  # the wall clock, for the server's placed → received
        self.marks: list[tuple[str, float]] = [("received", time.perf_counter())]

    def mark(self, name: str) -> None:
        self.marks.append((name, time.perf_counter()))

    def line(self, since: str = "received") -> str:
        """`name=ms` for each span after the mark `since`."""
        first = next(i for i, (name, _) in enumerate(self.marks) if name == since)
        marks = self.marks[first:]
        return " ".join(f"{b[0]}={(b[1] - a[1]) * 1000:.1f}" for a, b in zip(marks, marks[1:], strict=False))

    def log(self, log: logging.Logger, attempt_id: int, what: str = "start", since: str = "received") -> None:
        log.info("%s spans attempt=%s received=%.6f %s", what, attempt_id, self.received_wall, self.line(since))
