"""The one upstream httpx client per process (per event loop), with SSRF-pinned connections."""

from __future__ import annotations

import asyncio
import logging

import httpx
from django.conf import settings

from agents import ssrf
from gateway import tunnel

# httpx logs every request at INFO: a line per call on the hot path, with URLs that may carry secrets.
logging.getLogger("httpx").setLevel(logging.WARNING)

_clients: dict[int, httpx.AsyncClient] = {}


def upstream_client() -> httpx.AsyncClient:
    """A client is bound to the loop that created its connections, so one per running loop."""
    key = id(asyncio.get_running_loop())
    found = _clients.get(key)
    if found is None or found.is_closed:
        limits = httpx.Limits(
            max_connections=settings.EULER_GATEWAY_MAX_CONNECTIONS,
            max_keepalive_connections=settings.EULER_GATEWAY_MAX_KEEPALIVE,
            keepalive_expiry=settings.EULER_GATEWAY_KEEPALIVE_EXPIRY,
        )
        # euler-node://<attempt>:<port>: a replica behind its node's tunnel (gateway/tunnel.py), never dialled here
        found = ssrf.pinned_client(limits=limits, mounts=tunnel.mounts(limits))
        _clients[key] = found
    return found


async def close_upstream_client() -> None:
    found = _clients.pop(id(asyncio.get_running_loop()), None)
    if found is not None:
        await found.aclose()
