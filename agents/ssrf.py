"""SSRF guard: which upstream URLs and addresses the gateway may reach, and connections pinned to them.

`refusal()` is the pure core: given a URL, the addresses its host resolved to and the allowed
networks, it says why the URL is refused (or None). `check_url()` resolves and applies it at
registration; `PinnedBackend` applies it again at every connect and then dials the checked
address literal, so a DNS answer that changes between the check and the connect (rebinding)
cannot reach an internal address.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from urllib.parse import urlsplit

import httpcore
import httpx
from django.conf import settings

# The address classification is pure and shared with the image policy (the agent imports it on hosts).
from nodeagent.netaddr import METADATA_NAMES, IPNetwork, address_refusal, parse_networks


@lru_cache(maxsize=8)
def _allowed(specs: tuple[str, ...]) -> tuple[IPNetwork, ...]:
    return parse_networks(specs)


def allowed_networks(setting: str = "EULER_AGENT_ALLOWED_NETWORKS") -> tuple[IPNetwork, ...]:
    return _allowed(tuple(getattr(settings, setting, ()) or ()))


def url_refusal(url: str) -> str | None:
    """Why a URL's form is refused before any resolution (scheme, userinfo, metadata names)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return f"not a valid URL: {exc}"
    if parts.scheme not in ("http", "https"):
        return "only http and https URLs are allowed"
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        return "URLs with user information are not allowed"
    host = (parts.hostname or "").rstrip(".").lower()
    if not host:
        return "the URL has no host"
    if port == 0:
        return "port 0 is not allowed"
    if host in METADATA_NAMES or host.endswith(".localhost") or host.endswith(".internal"):
        return f"{host} is a metadata or local-only name"
    return None


def refusal(url: str, addresses: Iterable[str], allowed: Sequence[IPNetwork] = ()) -> str | None:
    """The one pure decision: None when every resolved address of the URL's host may be dialled."""
    why = url_refusal(url)
    if why:
        return why
    addresses = list(addresses)
    if not addresses:
        return f"{urlsplit(url).hostname} does not resolve"
    for address in addresses:
        why = address_refusal(address, allowed)
        if why:
            return why
    return None


def _system_resolve(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(info[4][0] for info in infos))


# The resolver at the boundary: tests swap it for a fake one (DNS rebinding).
resolver: Callable[[str, int], list[str]] = _system_resolve


def resolve(host: str, port: int) -> list[str]:
    host = host.strip("[]")
    try:
        return [str(ipaddress.ip_address(host.split("%", 1)[0]))]
    except ValueError:
        pass
    try:
        return resolver(host, port)
    except (OSError, UnicodeError):
        return []


def check_url(url: str, allowed: Sequence[IPNetwork] | None = None) -> str | None:
    """Resolve the URL's host and apply `refusal()`: None when the URL may be registered. `allowed` defaults to
    the gateway's EULER_AGENT_ALLOWED_NETWORKS (webhooks pass their own)."""
    why = url_refusal(url)
    if why:
        return why
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return refusal(url, resolve(parts.hostname or "", port), allowed_networks() if allowed is None else allowed)


class ForbiddenAddress(httpcore.ConnectError):
    """A connect refused by the SSRF guard (kept as the __cause__ of httpx.ConnectError)."""


class PinnedBackend(httpcore.AsyncNetworkBackend):
    """Resolves, checks every address, then connects to the checked literal (SNI/Host unchanged)."""

    def __init__(self, inner: httpcore.AsyncNetworkBackend, allowed: Callable[[], Sequence[IPNetwork]] | None = None):
        self._inner = inner
        self._allowed = allowed or allowed_networks

    async def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        try:
            literal = str(ipaddress.ip_address(host.strip("[]").split("%", 1)[0]))
            addresses = [literal]
        except ValueError:
            addresses = await asyncio.get_running_loop().run_in_executor(None, resolve, host, port)
        url = f"http://{'[' + host + ']' if ':' in host else host}:{port}/"
        why = refusal(url, addresses, self._allowed())
        if why:
            raise ForbiddenAddress(f"forbidden address: {why}")
        return await self._inner.connect_tcp(
            addresses[0], port, timeout=timeout, local_address=local_address, socket_options=socket_options
        )

    async def connect_unix_socket(self, path, timeout=None, socket_options=None):
        raise ForbiddenAddress("forbidden address: unix sockets are not allowed")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def pinned_transport(*, allowed=None, **kwargs) -> httpx.AsyncHTTPTransport:
    """An httpx transport whose every connection goes through PinnedBackend; no proxies from env."""
    transport = httpx.AsyncHTTPTransport(trust_env=False, **kwargs)
    pool = transport._pool  # httpx offers no public hook for the network backend
    pool._network_backend = PinnedBackend(pool._network_backend, allowed)
    return transport


def pinned_client(*, allowed: Callable[[], Sequence[IPNetwork]] | None = None, **kwargs) -> httpx.AsyncClient:
    """`allowed` (a callable, read at each connect) defaults to the gateway's allowed networks."""
    limits = kwargs.pop("limits", None) or httpx.Limits()
    return httpx.AsyncClient(
        transport=pinned_transport(limits=limits, allowed=allowed), trust_env=False, follow_redirects=False, **kwargs
    )
