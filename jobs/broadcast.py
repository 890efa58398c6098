"""A job's moves told to whoever follows it: the group `jobs.{id}` of the channel layer (the log websocket, the blocking
read), after the moving transaction commits (jobs/transitions.py is the only caller that moves jobs)."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import weakref
from collections.abc import Callable

from asgiref.sync import async_to_sync
from django.db import transaction

from euler.synchandler import serving_loop
from jobs.states import TERMINAL

log = logging.getLogger(__name__)


# (job id, its new state, the node of its attempt when assigned or running, else ""[, more fields of the message])
Move = tuple[int, str, str] | tuple[int, str, str, dict]


def group_name(job_id: int) -> str:
    return f"jobs.{job_id}"


async def _listened(layer, moves: list[Move]) -> list[Move]:
    """Only the moves whose job group has members: one pipelined ZCARD per Redis shard instead of a
    group_send per job (most jobs have nobody watching). Layers without these hooks get every move."""
    key_of = getattr(layer, "_group_key", None)
    shard_of = getattr(layer, "consistent_hash", None)
    conn_of = getattr(layer, "connection", None)
    if not (key_of and shard_of and conn_of) or len(moves) < 4:
        return moves
    by_shard: dict[int, list[Move]] = {}
    for move in moves:
        by_shard.setdefault(shard_of(group_name(move[0])), []).append(move)
    kept = []
    for shard, items in by_shard.items():
        pipe = conn_of(shard).pipeline(transaction=False)
        for job_id, *_ in items:
            pipe.zcard(key_of(group_name(job_id)))
        counts = await pipe.execute()
        kept.extend(move for move, n in zip(items, counts, strict=True) if n)
    return kept


def _message(state: str, node: str, extra: dict | None = None) -> dict:
    """The group message of a move; `node`: where an assigned or running job is (clients need not read the job);
    `extra`: what the move adds (an end's attempt and its last stored log chunk: jobs.transitions.move)."""
    message = {"type": "job.state", "state": state, "terminal": state in TERMINAL, **(extra or {})}
    if node:
        message["node"] = node
    return message


# Watchers in this process (the log websocket, the blocking read), told from the loop that serves them before the
# channel layer carries the same message to every watcher through Redis: a move made here (a node's report to this
# web process) reaches them a few Redis round trips sooner. They take the second copy as the duplicate it is.
_here: dict[str, set[tuple[asyncio.AbstractEventLoop, Callable[[dict], None]]]] = {}


def listen_here(job_id: int, callback: Callable[[dict], None]) -> Callable[[], None]:
    """Call `callback(message)` on the running loop for each move of the job made in this process (as well as the
    channel layer's copy); returns the function that stops it."""
    entry = (asyncio.get_running_loop(), callback)
    group = _here.setdefault(group_name(job_id), set())
    group.add(entry)

    def stop() -> None:
        group.discard(entry)
        if not group:
            _here.pop(group_name(job_id), None)

    return stop


def _tell_here(moves: list[Move]) -> None:
    if not _here:
        return
    current = asyncio.get_running_loop()
    for job_id, state, node, *extra in moves:
        for loop, callback in list(_here.get(group_name(job_id), ())):
            message = _message(state, node, *extra)
            if loop is current:
                callback(message)
            elif not loop.is_closed():
                loop.call_soon_threadsafe(callback, message)


async def _send_all(layer, moves: list[Move]) -> None:
    try:
        _tell_here(moves)
    except Exception as exc:  # noqa: BLE001 - the channel layer still tells them
        log.warning("job state broadcast to this process's watchers failed: %s", type(exc).__name__)
    moves = await _listened(layer, moves)
    # A few at a time: a batch of a thousand at once would exhaust the channel layer's connection pool.
    for start in range(0, len(moves), 32):
        await asyncio.gather(
            *(
                layer.group_send(group_name(job_id), _message(state, node, *extra))
                for job_id, state, node, *extra in moves[start : start + 32]
            )
        )


def send(moves: list[Move]) -> None:
    """Tell each moved job's watchers (its group) its new state. Never raises."""
    from channels.layers import get_channel_layer

    try:
        layer = get_channel_layer()
        if layer is None:
            return
        loop = serving_loop()
        if loop is not None:
            # In a web process: sent from its event loop, in order, while the request (a node's report, a cancel)
            # is answered; the node's next report no longer waits for the watchers to be told.
            loop.call_soon_threadsafe(_queue_send, loop, layer, moves)
        elif type(layer).__module__.startswith("channels_redis"):
            # Elsewhere (the scheduler's worker): on this process's own sender loop, whose connections last.
            asyncio.run_coroutine_threadsafe(_send_all(layer, moves), _sender_loop()).result(timeout=SEND_TIMEOUT)
        else:
            async_to_sync(_send_all)(layer, moves)
    except Exception as exc:  # noqa: BLE001 - a missed broadcast must not undo a committed transition
        log.warning("job state broadcast of %d moves failed: %s", len(moves), type(exc).__name__)


SEND_TIMEOUT = 10.0  # seconds a worker's send may take (Redis unreachable: the moves are logged as not told)
_sender: tuple[int, asyncio.AbstractEventLoop] | None = None
_sender_lock = threading.Lock()


def _sender_loop() -> asyncio.AbstractEventLoop:
    """This process's own event loop for broadcasts, on a daemon thread, started at its first send (a forked child
    starts its own). async_to_sync made a loop, a thread and, in channels_redis (which keeps its Redis pools per
    loop), new connections for every send."""
    global _sender
    with _sender_lock:
        if _sender is None or _sender[0] != os.getpid() or not _sender[1].is_running():
            loop = asyncio.new_event_loop()
            running = threading.Event()
            loop.call_soon(running.set)
            threading.Thread(target=loop.run_forever, daemon=True, name="euler-broadcast").start()
            running.wait(SEND_TIMEOUT)
            _sender = (os.getpid(), loop)
        return _sender[1]


_last_send: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # event loop -> its latest queued send


def _queue_send(loop: asyncio.AbstractEventLoop, layer, moves: list[Move]) -> None:
    """On the loop: a send that starts once the one queued before it ended (a job's moves arrive in order)."""
    _last_send[loop] = loop.create_task(_send_after(_last_send.get(loop), layer, moves))


async def _send_after(previous: asyncio.Task | None, layer, moves: list[Move]) -> None:
    if previous is not None:
        await asyncio.wait([previous])
    try:
        await _send_all(layer, moves)
    except Exception as exc:  # noqa: BLE001 - as in send
        log.warning("job state broadcast of %d moves failed: %s", len(moves), type(exc).__name__)


def on_commit(moves: list[Move]) -> None:
    """`send(moves)` once the current transaction commits."""
    transaction.on_commit(lambda: send(moves))
