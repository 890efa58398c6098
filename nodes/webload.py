"""This web process's load, for offline detection's overload guard (policy.overload_allowance): how late it
hears heartbeats, and how many it took.

Lag has two sources: the event loop running late (a monitor task sleeps PERIOD and notes by how much it
overslept; a loop that stopped ticking altogether counts the time since its last tick), and heartbeats
waiting for a heartbeat thread (the verifying path notes how long each waited). The worst of the last
WINDOW seconds is this process's lag. `cadence.register_web` publishes the figures with the process's
budget every few seconds.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque

PERIOD = 0.25  # seconds between the monitor's ticks
WINDOW = 10.0  # the lag reported is the worst of this many seconds
MIN_SPAN = 1.0  # the intake rate is measured over at least this many seconds

_state: dict = {"loop": None, "task": None, "tick": None, "beats": 0, "since": time.monotonic()}
_lags: deque[tuple[float, float]] = deque()  # (when, lag) of the last WINDOW seconds
_lock = threading.Lock()


def ensure_monitor() -> None:
    """Start the monitor on the running event loop if it is not running there (no waiting)."""
    loop = asyncio.get_running_loop()
    task = _state["task"]
    if _state["loop"] is loop and task is not None and not task.done():
        return
    _state["loop"] = loop
    _state["task"] = loop.create_task(_monitor())


async def _monitor() -> None:
    while True:
        start = time.monotonic()
        await asyncio.sleep(PERIOD)
        now = time.monotonic()
        record(now - start - PERIOD, now)


def record(lag: float, now: float) -> None:
    """A tick of the monitor, `lag` late."""
    _state["tick"] = now
    waited(lag, now)


def waited(lag: float, now: float | None = None) -> None:
    """Something that should have run at once ran `lag` seconds late (a tick, a heartbeat waiting for a thread)."""
    now = time.monotonic() if now is None else now
    with _lock:
        _lags.append((now, max(lag, 0.0)))
        while _lags and _lags[0][0] < now - WINDOW:
            _lags.popleft()


def beat() -> None:
    """A heartbeat was taken (called on the event loop, or in the request's thread under WSGI)."""
    _state["beats"] += 1


def take(now: float | None = None) -> tuple[float, float]:
    """(lag in seconds, heartbeats/s since the previous take)."""
    now = time.monotonic() if now is None else now
    with _lock:
        lag = max((lag for when, lag in _lags if when >= now - WINDOW), default=0.0)
    if _state["tick"] is not None and _state["task"] is not None and not _state["task"].done():
        lag = max(lag, now - _state["tick"] - PERIOD)
    with _lock:
        elapsed = now - _state["since"]
        if elapsed >= MIN_SPAN or "rate" not in _state:  # several threads may register at once: the
            _state["rate"] = _state["beats"] / max(elapsed, 1e-3)  # later ones report the same rate, not ~0
            _state["beats"], _state["since"] = 0, now
        return lag, _state["rate"]


def reset() -> None:
    """Tests."""
    _lags.clear()
    _state.pop("rate", None)
    _state.update(loop=None, task=None, tick=None, beats=0, since=time.monotonic())
