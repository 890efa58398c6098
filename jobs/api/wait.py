"""`GET /api/v1/jobs/{id}/wait`: a blocking read of one job, as Nomad's blocking queries and `docker wait`.

The caller names the state it last saw (`?state=running`) and gets the job as `GET /api/v1/jobs/{id}` shows it once
its state is another one, or when `?timeout=` seconds pass first; without `state` it returns once the job has ended.
It waits on the job's own state broadcast (the group `jobs.{id}` that the log websocket follows), not by reading the
job again and again: a client following a job costs the web process one read when the job moves, not one per poll.

A plain sync view, not DRF's, whose answer is `Deferred` when it must wait (euler.synchandler): the middleware chain
and the first read run on a sync view's thread as for any request, and the wait runs on the event loop after them,
holding no thread (an async view crossed ten middleware hooks thread by thread, on a thread of its own, on the way in
and again on the way out: ~4 ms of the answer after a move, bench/cli.py's server path). Its database reads run on
the sync views' threads (euler.synchandler.run_sync), which keep their connections.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from euler.errors import EulerError, InvalidInput, NotFound, error_response
from euler.synchandler import Deferred, deferring, run_sync
from jobs.logs_api import project_for_request
from jobs.states import TERMINAL, JobState
from quotas.access import declare, member

WAIT_DEFAULT_SECONDS = 30.0
WAIT_MAX_SECONDS = 60.0  # below every proxy's read timeout we ship (Caddy, uvicorn) and the client's 120 s


@dataclass(frozen=True)
class Wait:
    seen: str | None  # the state the caller last saw; None: wait for the end
    timeout: float


def parse_wait(query) -> Wait:
    """`state` (one of the job states, optional) and `timeout` (seconds, 0–60, default 30)."""
    seen = query.get("state") or None
    if seen is not None and seen not in JobState.values:
        raise InvalidInput(f"state must be one of: {', '.join(JobState.values)}.", code="invalid_state")
    raw = query.get("timeout")
    timeout = WAIT_DEFAULT_SECONDS
    if raw not in (None, ""):
        try:
            timeout = float(raw)
        except ValueError:
            timeout = -1.0
        if not 0 <= timeout <= WAIT_MAX_SECONDS:  # NaN fails both comparisons
            raise InvalidInput(
                f"timeout is a number of seconds from 0 to {WAIT_MAX_SECONDS:g}.", code="invalid_timeout"
            )
    return Wait(seen, timeout)


def moved(state: str, wait: Wait) -> bool:
    """Whether the wait is over: the job left the state the caller saw (or, with none named, ended)."""
    return state != wait.seen if wait.seen is not None else state in TERMINAL


def _state(project, job_id: int) -> str:
    from quotas import scoped

    found = scoped.jobs(project=project).filter(pk=job_id).values_list("state", flat=True).first()
    if found is None:
        raise NotFound("No such job.")  # another project's job too, as GET /api/v1/jobs/{id} answers
    return found


def _project_and_state(request, job_id: int):
    project = project_for_request(request)
    return project, _state(project, job_id)


def _body(project, job_id: int) -> bytes:
    from rest_framework.renderers import JSONRenderer

    from jobs import selectors
    from jobs.api.serializers import JobDetailSerializer

    return JSONRenderer().render(JobDetailSerializer(selectors.job_get(project=project, job_id=job_id)).data)


async def _until_moved(request, project, job_id: int, wait: Wait) -> bool:
    """Wait on the job's broadcasts until it moves as `wait` asks or the timeout passes; True when it moved."""
    from channels.layers import get_channel_layer

    from jobs import broadcast
    from jobs.broadcast import group_name

    layer = get_channel_layer()
    if layer is None:
        return moved(await run_sync(request, _state, project, job_id), wait)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait.timeout
    # The default prefix: channels_redis reads every process-specific channel of a process through one shared
    # receive loop on one key; a channel of another prefix is only read while no other receiver holds that loop.
    channel = await layer.new_channel()
    group = group_name(job_id)
    await layer.group_add(group, channel)  # before the read: no move falls between the two
    # Moves made in this process reach the queue directly too (jobs.broadcast.listen_here), without the layer's
    # round trips; the layer's copies follow them into the same queue.
    heard: asyncio.Queue = asyncio.Queue()
    unlisten = broadcast.listen_here(job_id, heard.put_nowait)
    relay = asyncio.ensure_future(_relay(layer, channel, heard))
    try:
        if moved(await run_sync(request, _state, project, job_id), wait):
            return True
        while (left := deadline - loop.time()) > 0:
            try:
                message = await asyncio.wait_for(heard.get(), left)
            except TimeoutError:
                return False
            if isinstance(message, Exception):
                raise message
            if message.get("type") == "job.state" and moved(message.get("state", ""), wait):
                return True
        return False
    finally:
        unlisten()
        relay.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await relay
        await layer.group_discard(group, channel)


async def _relay(layer, channel: str, heard: asyncio.Queue) -> None:
    """The layer's messages into the queue; its failure too (raised by the reader, as a direct receive raised)."""
    try:
        while True:
            heard.put_nowait(await layer.receive(channel))
    except Exception as exc:  # noqa: BLE001 - handed to the reader, which raises it
        heard.put_nowait(exc)


def _answer(body: bytes, *, done: bool) -> HttpResponse:
    headers = {"Cache-Control": "no-store", "X-Euler-Wait": "moved" if done else "timeout"}
    return HttpResponse(body, content_type="application/json", headers=headers)


@declare(get=member())
@require_GET
def job_wait(request: HttpRequest, job_id: int):
    try:
        wait = parse_wait(request.GET)
        project, state = _project_and_state(request, job_id)
    except EulerError as exc:
        return error_response(exc)
    if moved(state, wait) or wait.timeout <= 0:
        return _answer(_body(project, job_id), done=moved(state, wait))

    async def fill() -> HttpResponse:
        try:
            done = await _until_moved(request, project, job_id, wait)
            return _answer(await run_sync(request, _body, project, job_id), done=done)
        except EulerError as exc:  # the job went away meanwhile (a 404), as the first read would have said
            return error_response(exc)

    answer = Deferred(fill, content_type="application/json", headers={"Cache-Control": "no-store"})
    return answer if deferring(request) else answer.filled()
