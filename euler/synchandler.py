"""Sync views in one thread hop: the console, the REST API and the admin under uvicorn, as WSGI would run them.

Django's ASGI handler runs a request to a sync view in async mode: each sync-style middleware hook
(process_request, process_response: ten middleware here) is its own sync_to_async call, the request signals two
more, and all of them inside a ThreadSensitiveContext that starts a thread of its own for the request, so that
every request opens a fresh database connection in a fresh thread. For `POST /api/v1/jobs` that was more than
half of what the web process spent on it (bench/api_costs.py, BENCHMARKS.md "The start path").

`route_sync_views(app)` hands a request whose view is a plain function or class (resolved against ROOT_URLCONF,
as Django will resolve it) to SyncViewHandler: the body is read on the event loop, then one call on a small pool
of long-lived threads (EXECUTOR) runs what WSGI runs for it, in order and on one thread: the request_started
signal, the middleware chain loaded in sync mode, the view, and (for a response that is not streamed) its close,
which sends request_finished. These threads keep their database connections between requests (keep_connections).
The response is sent from the event loop. A sync view may answer `Deferred(fill)`: the middleware chain runs on it
as on any answer, then the handler awaits `fill()` on the event loop, the thread long given back (the blocking
read, jobs/api/wait.py, waits so without holding a thread or crossing ten middleware hooks thread by thread), and
sends what it made; a client that goes away first ends the wait. A request to an async view (log follows, the
gateway) goes to Django's own handler, `app`; one that matches no URL gets Django's 404 from the sync chain.

sync_to_async with an executor (not thread-sensitive) keeps asgiref's context: code in the view that calls
async_to_sync (the channel layer's group_send in on-commit hooks) runs its coroutine on the server's event loop
as before.
"""

from __future__ import annotations

import asyncio
import logging
import os
from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import ThreadSensitiveContext, iscoroutinefunction, sync_to_async
from django.conf import settings
from django.core import signals
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.core.handlers.wsgi import WSGIRequest
from django.db import connections
from django.http import HttpResponse
from django.urls import Resolver404, resolve, set_script_prefix

log = logging.getLogger(__name__)
DEFERS = "euler.defers"  # in the scope of a request that SyncViewHandler serves: a Deferred answer is filled

# Threads for sync views, created as needed and kept: a view waits for the database (or a lock) while holding one.
EXECUTOR = ThreadPoolExecutor(max_workers=settings.EULER_WEB_SYNC_THREADS, thread_name_prefix="euler-web-sync")


class SyncViewHandler(ASGIHandler):
    """Django's handler with the middleware chain in sync mode, the whole request on one pooled thread."""

    def load_middleware(self, is_async: bool = False) -> None:
        super().load_middleware(is_async=False)

    async def __call__(self, scope, receive, send) -> None:
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        scope = {**scope, DEFERS: True}
        try:
            response = await sync_to_async(self._respond, thread_sensitive=False, executor=EXECUTOR)(scope, body_file)
            if isinstance(response, Deferred) and not await _filled(response, self.listen_for_disconnect(receive)):
                return  # the client went away first
            if not response.streaming:
                await self.send_response(response, send)
                return
            try:  # a sync iterator is read on a thread of its own while it is sent, as Django's handler reads it
                async with ThreadSensitiveContext():
                    await self.send_response(response, send)
            finally:
                await sync_to_async(_close, thread_sensitive=False, executor=EXECUTOR)(response)
        finally:
            body_file.close()

    def _respond(self, scope, body_file):
        set_script_prefix(get_script_prefix(scope))
        keep_connections(check=True)
        signals.request_started.send(sender=ASGIHandler, scope=scope)
        request, response = self.create_request(scope, body_file)
        if request is not None:
            response = self.get_response(request)
        if not response.streaming:
            _close(response)
        return response


class Deferred(HttpResponse):
    """A sync view's answer whose status, body and headers are made after the middleware chain has run:
    `fill()`, a coroutine function, returns the HttpResponse to take them from. SyncViewHandler awaits it on the
    event loop; where another handler serves the view (Django's test clients) the view calls `filled()`."""

    def __init__(self, fill, **kwargs):
        super().__init__(**kwargs)
        self.fill = fill

    def take(self, made: HttpResponse) -> None:
        """The status, body and headers of `made` (those the middleware set stay unless `made` sets them too)."""
        self.status_code = made.status_code
        self.content = made.content
        for name, value in made.items():
            self[name] = value
        self["Content-Length"] = str(len(self.content))

    def filled(self) -> Deferred:
        """Filled on this thread (a view served by another handler than SyncViewHandler)."""
        from asgiref.sync import async_to_sync

        self.take(async_to_sync(self.fill)())
        return self


def deferring(request) -> bool:
    """Whether SyncViewHandler serves the request (a Deferred answer is filled after the middleware chain)."""
    return bool(getattr(request, "scope", {}).get(DEFERS))


async def _filled(response: Deferred, disconnect) -> bool:
    """Run `response.fill()` until it answers (True, the response filled) or the client disconnects (False)."""
    filling, gone = asyncio.ensure_future(response.fill()), asyncio.ensure_future(disconnect)
    try:
        await asyncio.wait({filling, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (filling, gone):
            task.cancel()
        await asyncio.gather(filling, gone, return_exceptions=True)
    if filling.cancelled():
        return False
    try:
        response.take(filling.result())
    except Exception:  # noqa: BLE001 - a 500 with the API's body, as Django's handler would answer
        log.exception("a deferred answer failed")
        from euler.errors import json_error

        response.take(json_error("server_error", "Internal error; it has been logged.", 500))
    return True


def _close(response) -> None:
    keep_connections()
    response.close()  # request_finished: what Django closes after a request, but this thread's healthy connection


def keep_connections(*, check: bool = False) -> None:
    """This thread's database connections outlive the request: the web's few long-lived threads (these, and the node
    API's, nodes/asyncdb.py) keep theirs, whatever CONN_MAX_AGE says (0 for the web, so that Django's own thread per
    request strands none; a connection per request was most of a submit on PostgreSQL). What else Django closes
    after a request it still closes (close_if_unusable_or_obsolete: one in an error that no longer answers, one left
    outside autocommit); with a connection pool (EULER_DB_POOL) that includes its age, so the connection goes back
    to the pool. `check` (a request starts): one kept from an earlier request is asked first whether it still
    answers (a database restart, an idle timeout), as CONN_HEALTH_CHECKS does."""
    for conn in connections.all(initialized_only=True):
        if conn.connection is None:
            continue
        if "pool" not in conn.settings_dict.get("OPTIONS", {}):
            conn.close_at = None
        conn.close_if_unusable_or_obsolete()
        if check and conn.connection is not None and not conn.is_usable():
            conn.close()


def _kept(fn, *args):
    keep_connections(check=True)
    try:
        return fn(*args)
    finally:
        keep_connections()


async def run_sync(request, fn, *args):
    """`fn(*args)` for an async view: on a sync-view thread with its kept connection (Django would run it on a
    thread of the request's own, with a connection of its own); in the caller's thread under WSGI (the test
    client), as Django runs it."""
    if isinstance(request, WSGIRequest):
        return await sync_to_async(fn)(*args)
    return await sync_to_async(_kept, thread_sensitive=False, executor=EXECUTOR)(fn, *args)


def sync_view(scope) -> bool:
    """Whether the view the request's path resolves to is sync (a 404 too: Django answers it from the sync chain)."""
    path, root = scope.get("path", ""), scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root) :]  # the path Django resolves (ASGIRequest.path_info)
    try:
        match = resolve(path)
    except Resolver404:
        return True
    return not iscoroutinefunction(match.func)


def route_sync_views(app):
    """An ASGI app that serves requests to sync views with SyncViewHandler and hands the rest to `app`."""
    handler = SyncViewHandler()

    async def router(scope, receive, send):
        if scope["type"] == "http" and sync_view(scope):
            return await handler(scope, receive, send)
        return await app(scope, receive, send)

    return router


def serving_loop():
    """The running event loop whose SyncToAsync called this thread (asgiref's own record): a web process's request
    thread; else None (a Celery worker, a command, a thread of no request)."""
    from asgiref.sync import SyncToAsync

    local = SyncToAsync.threadlocal
    loop = getattr(local, "main_event_loop", None)
    if loop is None or getattr(local, "main_event_loop_pid", None) != os.getpid() or not loop.is_running():
        return None
    return loop
