"""Prometheus metrics shared by every process through Redis.

Counters and histograms are accumulated in process memory (cheap on hot paths, including the
async gateway) and flushed to Redis by a daemon thread every second; `/metrics` reads Redis plus
gauges computed from the database at scrape time. Names are declared once below.
"""

from __future__ import annotations

import atexit
import logging
import sys
import threading
from collections import defaultdict, deque
from collections.abc import Callable

log = logging.getLogger(__name__)

COUNTERS = {
    "euler_placements_total": "Attempts placed on nodes by the scheduler",
    "euler_heartbeats_total": "Node heartbeats accepted",
    "euler_heartbeats_verified_total": "Node heartbeats the web process could not answer from memory (Redis read)",
    "euler_heartbeats_full_total": "Node heartbeats that read the node row from the database",
    "euler_invocations_total": "Agent invocations relayed by the gateway",
    "euler_log_bytes_total": "Job log bytes stored",
    "euler_scheduling_passes_total": "Scheduling passes run",
    "euler_tasks_skipped_total": "Periodic task runs skipped because the previous run was still going",
}
HISTOGRAMS = {
    "euler_scheduling_pass_seconds": (
        "Duration of a scheduling pass",
        (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
    ),
    "euler_gc_pause_seconds": (
        "Garbage collector pauses of the web process, by generation",
        (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
    ),
    "euler_gateway_latency_seconds": (
        "Gateway time to first byte from upstream",
        (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
    ),
}
_KEY_C = "euler:metrics:counters"
_KEY_H = "euler:metrics:hist"

_lock = threading.Lock()
_counters: dict[str, float] = defaultdict(float)
_hist: dict[str, float] = defaultdict(float)
_flusher: threading.Thread | None = None
_stop = threading.Event()


def _labels(labels: dict[str, str]) -> str:
    if not labels:
        return ""
    inner = ",".join(f'{k}="{str(v).replace(chr(92), "").replace(chr(34), "")}"' for k, v in sorted(labels.items()))
    return "{" + inner + "}"


# What inc and observe record, folded into _counters/_hist when flushed. Appending to a deque needs no lock:
# inc runs on the event loop for every heartbeat, and a lock shared with threads stalls the loop whenever
# its holder is descheduled while holding it.
_pending: deque = deque()


def inc(name: str, amount: float = 1.0, **labels: str) -> None:
    _pending.append((name + _labels(labels) if labels else name, amount, None))
    if _flusher is None or not _flusher.is_alive():
        _ensure_flusher()


def observe(name: str, seconds: float, **labels: str) -> None:
    HISTOGRAMS[name]  # noqa: B018 - an unknown name fails here, in the caller, as before
    _pending.append((name, seconds, _labels(labels)))
    if _flusher is None or not _flusher.is_alive():
        _ensure_flusher()


def _fold() -> None:
    """Move what inc/observe appended into the totals (under _lock)."""
    while True:
        try:
            key, value, lab = _pending.popleft()
        except IndexError:
            return
        if lab is None:
            _counters[key] += value
            continue
        for bound in HISTOGRAMS[key][1]:
            if value <= bound:
                _hist[f"{key}|{bound}|{lab}"] += 1
        _hist[f"{key}|+Inf|{lab}"] += 1
        _hist[f"{key}|sum|{lab}"] += value


def flush() -> None:
    with _lock:
        _fold()
        counters, hist = dict(_counters), dict(_hist)
        _counters.clear()
        _hist.clear()
    if not counters and not hist:
        return
    from euler.redis import client

    try:
        pipe = client().pipeline(transaction=False)
        for key, value in counters.items():
            pipe.hincrbyfloat(_KEY_C, key, value)
        for key, value in hist.items():
            pipe.hincrbyfloat(_KEY_H, key, value)
        pipe.execute()
    except Exception:  # noqa: BLE001 - metrics must never break the caller; put them back
        with _lock:
            for key, value in counters.items():
                _counters[key] += value
            for key, value in hist.items():
                _hist[key] += value


def _run() -> None:
    while not _stop.wait(1.0):
        flush()


def _ensure_flusher() -> None:
    global _flusher
    if sys.is_finalizing():  # no thread can start now; the atexit flush has run
        return
    if _flusher is None or not _flusher.is_alive():
        with _lock:
            if _flusher is None or not _flusher.is_alive():
                _flusher = threading.Thread(target=_run, name="euler-metrics", daemon=True)
                _flusher.start()
                atexit.register(flush)


def _fmt(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


_gauges: list[Callable[[], list[str]]] = []


def register_gauges(fn: Callable[[], list[str]]) -> Callable[[], list[str]]:
    """An app's gauges (Prometheus text lines, computed at scrape time). Apps register in their AppConfig.ready:
    the ground floor knows no app."""
    if fn not in _gauges:
        _gauges.append(fn)
    return fn


def render() -> str:
    """The Prometheus text exposition of every metric."""
    from euler.redis import client

    flush()
    lines: list[str] = []
    r = client()
    stored_c = {k.decode(): float(v) for k, v in r.hgetall(_KEY_C).items()}
    for name, help_text in COUNTERS.items():
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} counter"]
        series = {k: v for k, v in stored_c.items() if k == name or k.startswith(name + "{")}
        for key, value in sorted(series.items()) or [(name, 0.0)]:
            lines.append(f"{key} {_fmt(value)}")
    stored_h = {k.decode(): float(v) for k, v in r.hgetall(_KEY_H).items()}
    for name, (help_text, buckets) in HISTOGRAMS.items():
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} histogram"]
        label_sets = sorted({k.split("|", 2)[2] for k in stored_h if k.startswith(name + "|")}) or [""]
        for lab in label_sets:
            inner = lab[1:-1] if lab else ""
            for bound in [*buckets, "+Inf"]:
                le = f'le="{bound}"'
                labels = "{" + (inner + "," if inner else "") + le + "}"
                lines.append(f"{name}_bucket{labels} {_fmt(stored_h.get(f'{name}|{bound}|{lab}', 0))}")
            lines.append(f"{name}_sum{lab} {_fmt(stored_h.get(f'{name}|sum|{lab}', 0))}")
            lines.append(f"{name}_count{lab} {_fmt(stored_h.get(f'{name}|+Inf|{lab}', 0))}")

    # Gauges from the database, computed at scrape time by the apps that hold the rows.
    for gauges in _gauges:
        try:
            lines += gauges()
        except Exception as exc:  # noqa: BLE001 - a missing app or table must not break the scrape
            log.debug("gauges of %s unavailable: %s", getattr(gauges, "__module__", gauges), exc)
    return "\n".join(lines) + "\n"


def reset_for_tests() -> None:
    from euler.redis import client

    with _lock:
        _counters.clear()
        _hist.clear()
    client().delete(_KEY_C, _KEY_H)
