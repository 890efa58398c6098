"""WebSocket `/ws/jobs/{id}/logs/`: the backlog of the job's latest attempt, then live chunks, then `end`.

Messages: `{"type": "log", "attempt": N, "seq": S, "stream": "stdout"|"stderr", "data": "..."}` in seq order,
each seq once; `{"type": "attempt", "attempt": N}` when a retry starts a new attempt; `{"type": "state",
"state": ...}` when the job moves to a state that is not an end (queued, assigned, running), and once after the
backlog, where the job stands as the reader subscribed (with `pending_reason` when queued); `{"type": "end",
"state": ...}` when the job ends (then the server closes). `?after_seq=S&attempt=N` resumes after a reconnect.
The database is the source of truth: a live message that skips a seq makes the consumer read the gap.
"""

from __future__ import annotations

import asyncio
import contextlib
from types import SimpleNamespace

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from jobs import broadcast
from jobs.broadcast import group_name
from jobs.logs_api import READ_BATCH, chunks_after, job_progress, log_target
from jobs.models import Attempt
from jobs.states import TERMINAL

CLOSE_UNAUTHENTICATED = 4401
CLOSE_NOT_FOUND = 4404


@database_sync_to_async
def _project_from_session(scope):
    from quotas.selectors import session_project

    user = scope.get("user")
    if user is None or not user.is_authenticated:
        return None
    return session_project(SimpleNamespace(user=user, session=scope.get("session") or {}))


@database_sync_to_async
def _alive(credential: tuple) -> bool:
    from quotas.selectors import credential_alive

    return credential_alive(credential)


@database_sync_to_async
def _opening(project, job_id: int, after: tuple[int, int | None]):
    """What a new reader is sent, in one trip to the database: the job's attempt to follow (NotFound when it is
    another project's), where its log resumes, the job as it stands (state, pending reason, node) and the first
    backlog. The state is read before the chunks, so an ended job's backlog read here is complete."""
    target = log_target(project=project, job_id=job_id)
    after_seq, attempt = after
    if attempt is not None and attempt != target.attempt_number:
        after_seq = -1  # a retry started while the client was away: the new attempt's log from its start
    progress = job_progress(project.pk, job_id)
    rows = chunks_after(target.attempt_id, after_seq) if target.attempt_id is not None else []
    return target, after_seq, progress, rows


@database_sync_to_async
def _chunks(attempt_id: int, after: int):
    return chunks_after(attempt_id, after)


@database_sync_to_async
def _attempt(attempt_id: int):
    return Attempt.objects.filter(pk=attempt_id).values("pk", "number", "job_id").first()


class JobLogsConsumer(AsyncJsonWebsocketConsumer):
    group: str | None = None
    watcher: asyncio.Task | None = None
    unlisten = None  # stops the moves made in this process from reaching us directly (jobs.broadcast.listen_here)
    last_state: dict | None = None  # the last `state` message sent

    async def connect(self):
        from euler.errors import NotFound

        self.job_id = int(self.scope["url_route"]["kwargs"]["job_id"])
        project = self.scope.get("euler_project")
        if project is None and not self.scope.get("euler_api_key"):
            project = await _project_from_session(self.scope)
        if project is None:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        if self.scope.get("euler_api_key_id"):
            self.credential = ("key", self.scope["euler_api_key_id"])
        else:
            session = self.scope.get("session")
            user = self.scope.get("user")
            self.credential = ("session", getattr(session, "session_key", None), getattr(user, "pk", None), project.pk)
        self.ended = False
        self.lock = asyncio.Lock()  # one message at a time: the channel layer's, and the moves told here directly
        self.told: set[asyncio.Task] = set()
        self.group = group_name(self.job_id)
        await self.channel_layer.group_add(self.group, self.channel_name)  # before the reads: nothing falls between
        try:
            target, self.last_seq, progress, rows = await _opening(project, self.job_id, self._after_seq())
        except NotFound:
            await self.channel_layer.group_discard(self.group, self.channel_name)
            self.group = None
            await self.close(code=CLOSE_NOT_FOUND)  # another project's job: refused like a missing one
            return
        self.attempt_id, self.attempt_number = target.attempt_id, target.attempt_number
        await self.accept()
        self.watcher = asyncio.ensure_future(self._watch_credential())
        for seq, stream, data in rows:
            await self._send_chunk(seq, stream, data)
        if len(rows) == READ_BATCH:
            await self._catch_up()
        if progress.state in TERMINAL:
            await self._end(progress.state)
        else:  # where the job stands: the reader need not read the job itself (later moves follow as messages)
            self.last_state = progress.message()
            await self.send_json(self.last_state)
            # A move this web process makes (a node's report to it) reaches us without the channel layer's round
            # trips too; its copy through the layer then finds it handled.
            self.unlisten = broadcast.listen_here(self.job_id, self._told_here)

    def _told_here(self, message: dict) -> None:
        if message.get("type") == "job.state" and not self.ended:
            task = asyncio.ensure_future(self.job_state(message))
            self.told.add(task)
            task.add_done_callback(self.told.discard)

    def _after_seq(self) -> tuple[int, int | None]:
        """`?after_seq=S` (with `&attempt=N`, the attempt S belongs to): where to resume after a reconnect, and
        the attempt it belongs to (None: whichever is the latest); (-1, None) when absent or malformed."""
        from urllib.parse import parse_qs

        query = parse_qs(self.scope.get("query_string", b"").decode("latin-1"))
        after = (query.get("after_seq") or [""])[0]
        attempt = (query.get("attempt") or [""])[0]
        if not after.lstrip("-").isdigit():
            return -1, None
        if attempt and not attempt.isdigit():
            return -1, None
        return max(int(after), -1), int(attempt) if attempt else None

    async def _watch_credential(self) -> None:
        """Close the socket once its key is revoked, or its session signed out or removed from the project."""
        from quotas.selectors import RECHECK_SECONDS

        while True:
            await asyncio.sleep(RECHECK_SECONDS)
            try:
                alive = await _alive(self.credential)
            except Exception:  # noqa: BLE001 - a database hiccup is not a revocation; look again next time
                continue
            if not alive:
                await self.close(code=CLOSE_UNAUTHENTICATED)
                return

    async def disconnect(self, code):
        if self.unlisten is not None:
            self.unlisten()
            self.unlisten = None
        for task in list(getattr(self, "told", ())):
            task.cancel()
        if self.watcher is not None:
            self.watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.watcher
            self.watcher = None
        if self.group is not None:
            await self.channel_layer.group_discard(self.group, self.channel_name)
            self.group = None

    async def receive_json(self, content, **kwargs):
        """Readers only listen; anything they send is ignored."""

    async def _catch_up(self, upto: int | None = None) -> None:
        if self.attempt_id is None:
            return
        while True:
            rows = await _chunks(self.attempt_id, self.last_seq)
            for seq, stream, data in rows:
                await self._send_chunk(seq, stream, data)
            if not rows or (upto is not None and self.last_seq >= upto):
                return

    async def _send_chunk(self, seq: int, stream: str, data: str) -> None:
        self.last_seq = seq
        await self.send_json(
            {"type": "log", "attempt": self.attempt_number, "seq": seq, "stream": stream, "data": data}
        )

    async def job_log(self, message):
        async with self.lock:
            await self._log(message)

    async def _log(self, message):
        if self.ended:
            return
        attempt_id = message.get("attempt_id")
        if attempt_id != self.attempt_id:
            info = await _attempt(attempt_id) if attempt_id else None
            if info is None or info["job_id"] != self.job_id or (self.attempt_number or 0) > info["number"]:
                return
            await self._catch_up()  # the old attempt's tail, then switch to the retry's log
            self.attempt_id, self.attempt_number, self.last_seq = info["pk"], info["number"], -1
            await self.send_json({"type": "attempt", "attempt": self.attempt_number})
        seq = message["seq"]
        if seq <= self.last_seq:
            return
        if seq == self.last_seq + 1:
            await self._send_chunk(seq, message["stream"], message["data"])
        else:
            await self._catch_up(upto=seq)

    async def job_state(self, message):
        async with self.lock:
            await self._state(message)

    async def _state(self, message):
        if self.ended:
            return
        if message.get("terminal"):
            told = message.get("log_seq")
            if not (message.get("attempt_id") == self.attempt_id and told is not None and self.last_seq >= told):
                await self._catch_up()  # a chunk may not have reached us yet: the database has every one
            await self._end(message.get("state", ""))
        else:  # progress for clients such as `euler run` (queued → assigned → running), without polling
            state = {"type": "state", "state": message.get("state", "")}
            if message.get("node"):
                state["node"] = message["node"]  # where it was assigned or runs: no need to read the job
            if state != self.last_state:  # the same move told twice (here, and through the channel layer)
                self.last_state = state
                await self.send_json(state)

    async def _end(self, state: str) -> None:
        self.ended = True
        if self.unlisten is not None:
            self.unlisten()
            self.unlisten = None
        await self.send_json({"type": "end", "state": state})
        await self.close()
