"""The assignment channel: wake-ups through Redis, and the hooks the jobs app plugs into poll and heartbeat.

`wake(node_id)` publishes on Redis; every web process listens on one pattern subscription per event
loop and sets the asyncio events of the long-polls waiting for that node, which then ask the
providers again. Providers and hooks are registered in the consuming app's `AppConfig.ready()`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import time
import weakref
from collections.abc import Callable

from nodeagent import protocol

log = logging.getLogger(__name__)

WAKE_PREFIX = "euler:node-wake:"

PollProvider = Callable[..., tuple[list[protocol.Assignment], list[protocol.Command]]]

QUIET_MAX = 300.0  # seconds a poll answer of "nothing" is trusted without asking the providers again


class Work(tuple):
    """What a provider may return instead of a plain `(assignments, commands)`: the same pair, and
    `quiet_until` (Unix time): when it has nothing, until when it will have nothing unless something wakes the
    node (placement, cancel, approval: they all publish a wake-up). A poll answered empty then skips the
    providers on the node's next poll (Waiter.quiet). None: it cannot say; the providers are asked every time."""

    quiet_until: float | None

    def __new__(cls, assignments, commands, *, quiet_until: float | None = None):
        work = super().__new__(cls, (assignments, commands))
        work.quiet_until = quiet_until
        return work


HeartbeatHook = Callable[..., list[protocol.Command]]

_poll_providers: list[PollProvider] = []
_heartbeat_hooks: list[HeartbeatHook] = []
_busy_of: dict[Callable, Callable[[], set[int]]] = {}  # poll provider -> its snapshot of busy nodes


def register_poll_provider(fn: PollProvider) -> PollProvider:
    if fn not in _poll_providers:
        _poll_providers.append(fn)
    return fn


def register_busy_provider(provider: PollProvider, busy: Callable[[], set[int]]) -> None:
    """`busy()`: the nodes `provider` may have something for now (one query for all nodes). When every poll
    provider has one, a web process takes this snapshot as its subscription starts, and the other nodes'
    first polls wait without asking the providers: a restarted web process is not asked N times at once."""
    _busy_of[provider] = busy


def busy_nodes() -> set[int] | None:
    """The union of the poll providers' snapshots; None when one of them has none (then no snapshot)."""
    found: set[int] = set()
    for provider in _poll_providers:
        busy = _busy_of.get(provider)
        if busy is None:
            return None
        found |= busy()
    return found


def register_heartbeat_hook(fn: HeartbeatHook) -> HeartbeatHook:
    if fn not in _heartbeat_hooks:
        _heartbeat_hooks.append(fn)
    return fn


def poll_work(node) -> Work:
    """Everything the providers have for this node now (sync: call through sync_to_async from async code), and
    until when they will have nothing unwoken (the earliest of theirs; None if one of them cannot say)."""
    assignments: list[protocol.Assignment] = []
    commands: list[protocol.Command] = []
    quiet_until: float | None = math.inf
    for fn in _poll_providers:
        found = fn(node)
        a, c = found
        assignments.extend(a)
        commands.extend(c)
        theirs = getattr(found, "quiet_until", None)
        quiet_until = None if quiet_until is None or theirs is None else min(quiet_until, theirs)
    return Work(assignments, commands, quiet_until=quiet_until)


class Commands(list):
    """What a heartbeat hook may return instead of a plain list: its commands, and `again=True` when it is
    waiting for something (a stopped container to disappear, a grace to pass) and wants the next heartbeat.
    Hooks are not run on every heartbeat: on the full path, when the node's listed attempts change, when a
    hook asked `again`, and at least every EULER_NODE_HOOKS_EVERY seconds."""

    def __init__(self, items=(), *, again: bool = False) -> None:
        super().__init__(items)
        self.again = again


def heartbeat_commands(node, hb: protocol.Heartbeat) -> Commands:
    commands = Commands()
    for fn in _heartbeat_hooks:
        found = fn(node, hb)
        commands.extend(found)
        commands.again = commands.again or bool(getattr(found, "again", False))
    return commands


def wake(node_id: int) -> None:
    """Answer the node's long-poll now (it asks the providers again). Never raises: a lost wake-up
    only delays work until the next poll."""
    from euler.redis import client

    try:
        client().publish(f"{WAKE_PREFIX}{node_id}", b"1")
    except Exception as exc:  # noqa: BLE001 - Redis down must not fail the caller's transaction
        log.warning("node wake-up for %s not sent: %s", node_id, type(exc).__name__)


class _Listener:
    """One pattern subscription per event loop, fanning wake-ups out to waiting polls."""

    def __init__(self) -> None:
        self.waiters: dict[int, set[asyncio.Event]] = {}
        self.quiet: dict[int, float] = {}  # node id -> Unix time until which its providers have nothing
        # The snapshot taken as the subscription started: nodes outside `busy`, not woken since, have nothing.
        self.snapshot: set[int] | None = None
        self.woken: set[int] = set()
        self.epoch = 0
        self.ready = asyncio.Event()
        self.task: asyncio.Task | None = None

    def _changed(self, node_id: int) -> None:
        """Something for this node may have changed: ask its providers at its next poll."""
        self.quiet.pop(node_id, None)
        if self.snapshot is not None:
            self.woken.add(node_id)

    def quiet_now(self, node_id: int) -> bool:
        until = self.quiet.get(node_id)
        if until is not None:
            if time.time() < until:
                return True
            self.quiet.pop(node_id, None)
            self.woken.add(node_id)  # its own quiet time is over: the snapshot no longer speaks for it
            return False
        return self.snapshot is not None and node_id not in self.snapshot and node_id not in self.woken

    async def _take_snapshot(self, epoch: int) -> None:
        from nodes import asyncdb

        try:
            busy = await asyncio.get_running_loop().run_in_executor(
                asyncdb.pool(), functools.partial(asyncdb._in_pool, busy_nodes)
            )
        except Exception as exc:  # noqa: BLE001 - without it every node's first poll asks, as before
            log.warning("poll snapshot not taken: %s", type(exc).__name__)
            return
        if busy is not None and epoch == self.epoch:
            self.snapshot = busy

    async def run(self) -> None:
        from euler.redis import async_client
        from nodes import livestore, memory

        loop = asyncio.get_running_loop()
        while True:
            pubsub = async_client().pubsub()
            try:
                await pubsub.psubscribe(f"{WAKE_PREFIX}*")
                # Node-row invalidations ride the same connection: while it holds, cached rows are current.
                inval = livestore.inval_channel()
                await pubsub.subscribe(inval)
                memory.subscribed(loop)
                memory.refresh_later(everyone=True)  # a new process (or one back from a Redis outage) warms up
                self.ready.set()
                # A reconnect may have missed wake-ups: wake everyone, they re-ask the providers.
                self._wake_all()
                # Taken after subscribing: work that its query misses was made after, and woke its node.
                loop.create_task(self._take_snapshot(self.epoch))
                while True:
                    msg = await pubsub.get_message(ignore_subscribe_messages=True, timeout=30)
                    if msg is not None and msg.get("type") == "message":
                        changed = livestore.parse_invalidation(msg.get("data"))
                        for node_id in changed:
                            # Approval, trust: what a poll of a pending node was told may have moved. Not a
                            # wake-up: a changed row gives a node no work (placement and stop orders wake it).
                            self.quiet.pop(node_id, None)
                        memory.refresh_later(memory.invalidate(changed))  # read again, in bulk
                        continue
                    if msg is None or msg.get("type") != "pmessage":
                        continue
                    channel = msg["channel"].decode() if isinstance(msg["channel"], bytes) else msg["channel"]
                    try:
                        node_id = int(channel[len(WAKE_PREFIX) :])
                    except ValueError:
                        continue
                    self._changed(node_id)
                    for event in self.waiters.get(node_id, ()):
                        event.set()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - keep listening through Redis restarts
                memory.unsubscribed(loop)
                self.ready.clear()
                self._forget_quiet()  # wake-ups may be missed from now on
                log.warning("node wake-up listener lost Redis (%s); retrying", type(exc).__name__)
                await asyncio.sleep(1)
            finally:
                memory.unsubscribed(loop)
                try:
                    await pubsub.aclose()
                except Exception:  # noqa: BLE001, S110
                    pass

    def _forget_quiet(self) -> None:
        self.epoch += 1
        self.quiet.clear()
        self.snapshot = None
        self.woken = set()

    def _wake_all(self) -> None:
        self._forget_quiet()
        for events in self.waiters.values():
            for event in events:
                event.set()


_listeners: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Listener] = weakref.WeakKeyDictionary()


def ensure_listener() -> _Listener:
    """This event loop's subscription, started if it is not running (no waiting)."""
    loop = asyncio.get_running_loop()
    listener = _listeners.get(loop)
    if listener is None or listener.task is None or listener.task.done():
        listener = _Listener()
        listener.task = loop.create_task(listener.run())
        _listeners[loop] = listener
    return listener


async def _listener() -> _Listener:
    listener = ensure_listener()
    try:
        await asyncio.wait_for(listener.ready.wait(), timeout=2)
    except TimeoutError:
        log.warning("node wake-up listener is not subscribed yet; polls fall back to their timeout")
    return listener


class Waiter:
    """`async with Waiter(node_id) as w: ... await w.wait(timeout)` — registered before the providers are
    asked, so a wake-up between asking and waiting is not lost."""

    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        self.event = asyncio.Event()
        self.listener: _Listener | None = None

    async def __aenter__(self) -> Waiter:
        self.listener = await _listener()
        self.listener.waiters.setdefault(self.node_id, set()).add(self.event)
        return self

    async def __aexit__(self, *exc) -> None:
        events = self.listener.waiters.get(self.node_id)
        if events is not None:
            events.discard(self.event)
            if not events:
                self.listener.waiters.pop(self.node_id, None)

    def quiet(self) -> bool:
        """The node's providers had nothing at the last ask and nothing has woken it since: no need to ask."""
        listener = self.listener
        if listener is None or not listener.ready.is_set() or self.event.is_set():
            return False
        return listener.quiet_now(self.node_id)

    def asked(self, work) -> None:
        """The providers answered `work` (asked after this waiter was registered): remember an empty answer
        unless a wake-up came in meanwhile (it may have been about work the answer did not see yet)."""
        listener = self.listener
        until = getattr(work, "quiet_until", None)
        if listener is None or until is None or work[0] or work[1] or self.event.is_set():
            return
        if not listener.ready.is_set():
            return
        listener.quiet[self.node_id] = min(until, time.time() + QUIET_MAX)

    async def wait(self, timeout: float) -> bool:
        """True when woken, False on timeout; re-arms for the next wait."""
        try:
            await asyncio.wait_for(self.event.wait(), timeout=timeout)
        except TimeoutError:
            return False
        self.event.clear()
        return True
