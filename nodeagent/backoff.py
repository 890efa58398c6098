"""Capped exponential backoff with jitter, and a link-state tracker that logs once per change."""

from __future__ import annotations

import logging
import random
import threading
import time


class Backoff:
    def __init__(self, *, base: float = 1.0, cap: float = 60.0, rng: random.Random | None = None) -> None:
        self.base = base
        self.cap = cap
        self.failures = 0
        self.rng = rng or random.Random()

    def next_delay(self) -> float:
        """Full jitter: a random delay up to min(cap, base * 2^failures), at least a tenth of base."""
        ceiling = min(self.cap, self.base * (2**self.failures))
        self.failures = min(self.failures + 1, 32)
        return max(self.base / 10, self.rng.uniform(0, ceiling))

    def reset(self) -> None:
        self.failures = 0


class Link:
    """Whether the control plane answers; logs a line when that changes, not on every try."""

    def __init__(self, log: logging.Logger) -> None:
        self.log = log
        self.up: bool | None = None
        self.down_since: float | None = None
        self._lock = threading.Lock()

    def ok(self) -> None:
        with self._lock:
            if self.up is False:
                self.log.info("control plane reachable again after %.0f s", time.monotonic() - self.down_since)
            self.up, self.down_since = True, None

    def failed(self, why: str) -> None:
        with self._lock:
            if self.up is not False:
                self.log.warning("control plane unreachable (%s); retrying with backoff", why)
                self.down_since = time.monotonic()
            self.up = False
