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
from django.db import connections

_pool: ThreadPoolExecutor | None = None


def pool() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=settings.EULER_NODE_DB_THREADS, thread_name_prefix="node-db")
    return _pool


def _in_pool(fn, *args):
    # These few threads keep their connections for their lifetime, whatever CONN_MAX_AGE says (it is 0
    # for the web: request threads must not strand connections); only a broken one is replaced.
    for conn in connections.all(initialized_only=True):
        if conn.connection is not None and conn.errors_occurred:
            if conn.is_usable():
                conn.errors_occurred = False
            else:
                conn.close()
    return fn(*args)


async def run_db(request, fn, *args):
    if isinstance(request, WSGIRequest):
        return await sync_to_async(fn)(*args)
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(pool(), functools.partial(_in_pool, fn, *args))
