"""Every connection a pull makes: resolved, every address checked against the node's address policy, then dialled
at the checked address (no second resolution, so a rebinding name cannot reach a private address), no proxy
from the environment, no redirect followed on its own (nodeagent/registry/session.py follows them one by one).

The same shape as the gateway's SSRF guard (agents/ssrf.py `PinnedBackend`), synchronous, for the agent's
thread. The policy is the one jobs get (nodeagent/netaddr.py's ranges, the lender's allowed and blocked
CIDRs); a registry the lender names in EULER_NODE_ALLOWED_IMAGES is theirs to open at any address, and only
that host: a token realm or a redirect it sends elsewhere is checked like any other.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

import httpcore
import httpx

from nodeagent import imageref
from nodeagent.netaddr import METADATA_NAMES, IPNetwork, address_refusal, parse_networks

CONNECT_SECONDS = 10.0
READ_SECONDS = 30.0


@dataclass(frozen=True)
class DialPolicy:
    allowed: tuple[IPNetwork, ...] = ()  # the lender's EULER_NODE_JOB_ALLOWED_NETWORKS
    blocked: tuple[IPNetwork, ...] = ()  # the lender's EULER_NODE_JOB_BLOCKED_NETWORKS: win over `allowed`
    open_hosts: tuple[str, ...] = ()  # registries the lender names (`host` or `host:port`), any address

    @classmethod
    def of(cls, *, allowed: Iterable[str] = (), blocked: Iterable[str] = (), open_hosts: Iterable[str] = ()):
        return cls(parse_networks(allowed), parse_networks(blocked), tuple(h.lower() for h in open_hosts))

    def is_open(self, host: str, port: int) -> bool:
        host = host.lower().strip("[]")
        return any(entry in (host, f"{host}:{port}") for entry in self.open_hosts)


def refusal(policy: DialPolicy, host: str, port: int, addresses: list[str] | None) -> str | None:
    """Pure: why (host, port), resolved to `addresses` (None: not in time), may not be dialled, or None."""
    name = host.lower().rstrip(".").strip("[]")
    if policy.is_open(name, port):
        return None if addresses else f"{name} does not resolve"
    if name in METADATA_NAMES or name.endswith((".localhost", ".internal", ".local")):
        return f"{name} is a local-only name"
    if not addresses:
        return f"{name} does not resolve"
    for address in addresses:
        try:
            ip = ipaddress.ip_address(address.split("%", 1)[0])
        except ValueError:
            return f"{address!r} is not an IP address"
        if any(ip.version == net.version and ip in net for net in policy.blocked):
            return f"{address} is in a blocked network"
        why = address_refusal(address, policy.allowed)
        if why:
            return why
    return None


class Forbidden(httpcore.ConnectError):
    """A connection the address policy refused; nothing was dialled. The reason is for the agent's log only."""


def _addresses(host: str) -> list[str] | None:
    try:
        return [str(ipaddress.ip_address(host.strip("[]").split("%", 1)[0]))]
    except ValueError:
        return imageref.resolve(host)


class PinnedBackend(httpcore.NetworkBackend):
    """Resolves, checks every address, then connects to the first checked address (TLS SNI stays the name)."""

    def __init__(self, policy: DialPolicy, inner: httpcore.NetworkBackend | None = None):
        self.policy = policy
        self._inner = inner or httpcore.SyncBackend()

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        addresses = _addresses(host)
        why = refusal(self.policy, host, port, addresses)
        if why:
            raise Forbidden(f"forbidden address: {why}")
        return self._inner.connect_tcp(
            addresses[0], port, timeout=timeout, local_address=local_address, socket_options=socket_options
        )

    def connect_unix_socket(self, path, timeout=None, socket_options=None):
        raise Forbidden("forbidden address: unix sockets are not allowed")

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def pinned_client(policy: DialPolicy, *, verify: bool = True) -> httpx.Client:
    """An httpx client whose every connection goes through PinnedBackend; no proxy, no redirects of its own.
    `verify=False` only for the https attempt at a registry the engine itself treats as insecure."""
    transport = httpx.HTTPTransport(trust_env=False, verify=verify, retries=0)
    pool = transport._pool  # httpx has no public hook for the network backend (as in agents/ssrf.py)
    pool._network_backend = PinnedBackend(policy, pool._network_backend)
    return httpx.Client(
        transport=transport,
        trust_env=False,
        follow_redirects=False,
        timeout=httpx.Timeout(READ_SECONDS, connect=CONNECT_SECONDS),
        headers={"User-Agent": "euler-node", "Accept-Encoding": "identity"},  # blobs are hashed as sent
    )
