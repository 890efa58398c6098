"""What the other threads of an attempt tell its owner thread (nodeagent/attempt_run.py), and the inbox they put it in."""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass

from nodeagent.attempt_exit import Exit


@dataclass(frozen=True)
class StopAsked:
    reason: str  # as the server or the guard said it: cancelled | timeout | stale_attempt | disk_limit | …
    message: str = ""
    grace: int | None = None  # the stop command's grace (None: the assignment's)


@dataclass(frozen=True)
class OutputEnded:
    pass


@dataclass(frozen=True)
class Exited:
    exit: Exit


@dataclass(frozen=True)
class FirstEntry:
    ts: int  # the engine log's first timestamp (ns), surely the job's first entry


class Inbox:
    """Signals for the owner thread. `event` wakes it; the shipper sets the same event when output arrives."""

    def __init__(self, event: threading.Event):
        self.event = event
        self._items: deque = deque()  # append and popleft are atomic: any thread puts, the owner takes

    def put(self, signal) -> None:
        self._items.append(signal)
        self.event.set()

    def take(self) -> list:
        items = []
        while True:
            try:
                items.append(self._items.popleft())
            except IndexError:
                return items
