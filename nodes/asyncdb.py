"""Database work for the async node endpoints, on a small bounded thread pool.

Under an ASGI server Django runs each sync view in a thread of its own, and with persistent connections
every such thread opens (and strands) a database connection: thousands of nodes would exhaust
PostgreSQL. The hot node endpoints are async views that hand their database work to this pool, whose
threads keep their connections for their lifetime. Under WSGI (and Django's test Client) the work
runs in the request's own thread, as Django does for any view.
"""

from __future__ import annotations

import asyncio
import functools
from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.handlers.wsgi import WSGIRequest
from django.http import HttpResponse
from django.template.response import SimpleTemplateResponse

from euler.synchandler import keep_connections

_pools: dict[str, ThreadPoolExecutor] = {}


def _named_pool(name: str, size: int) -> ThreadPoolExecutor:
    executor = _pools.get(name)
    if executor is None:
        executor = _pools.setdefault(name, ThreadPoolExecutor(max_workers=size, thread_name_prefix=name))
    return executor


def pool() -> ThreadPoolExecutor:
    """Reports, logs, polls: the node API's database threads."""
    return _named_pool("node-db", settings.EULER_NODE_DB_THREADS)


def beat_pool() -> ThreadPoolExecutor:
    """The heartbeat's own threads: liveness must not queue behind reports and polls waiting on the database."""
    return _named_pool("node-beat", settings.EULER_NODE_BEAT_THREADS)


def _in_pool(fn, *args):
    keep_connections()  # these few threads keep their connections; only a broken one is replaced
    return fn(*args)


async def run_db(request, fn, *args, executor=pool):
    """`fn` off the event loop on `executor()`'s threads (in Django's sync thread under WSGI)."""
    if isinstance(request, WSGIRequest):
        return await sync_to_async(fn)(*args)
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(executor(), functools.partial(_in_pool, fn, *args))


async def run_view(request, fn, *args):
    """`run_db` through SyncToAsync: code in the thread that calls async_to_sync (the channel layer's
    group_send when log chunks are stored) runs it on this event loop rather than on a new loop of its own."""
    if isinstance(request, WSGIRequest):
        return await sync_to_async(fn)(*args)
    return await sync_to_async(functools.partial(_in_pool, fn, *args), thread_sensitive=False, executor=pool())()


async def run_light(request, fn, *args):
    """The heartbeat's hop off the event loop: on its own threads, without SyncToAsync's bookkeeping."""
    return await run_db(request, fn, *args, executor=beat_pool)


def pooled_view(view):
    """A sync view (DRF's dispatch) run on the node database pool rather than the one thread that Django gives
    every sync view of an ASGI process: reports and log chunks from thousands of nodes would queue behind
    each other and behind the API there. The response is rendered in the pool too."""

    async def pooled(request, *args, **kwargs):
        def call():
            response = view(request, *args, **kwargs)
            if isinstance(response, SimpleTemplateResponse):
                response.render()
            return response

        response = await run_view(request, call)
        if isinstance(response, SimpleTemplateResponse):  # rendered: hand Django a plain response
            plain = HttpResponse(response.content, status=response.status_code)
            for name, value in response.items():
                plain[name] = value
            return plain
        return response

    for attr in ("csrf_exempt", "view_class", "view_initkwargs", "cls", "initkwargs"):
        if hasattr(view, attr):
            setattr(pooled, attr, getattr(view, attr))
    pooled.__name__ = getattr(view, "__name__", "pooled")
    pooled.__doc__ = view.__doc__
    return pooled
