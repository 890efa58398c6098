"""Node authentication and the HTTPS rule for node endpoints (pure parts first, then the DB lookup)."""

from __future__ import annotations

import ipaddress
from functools import lru_cache

from euler import tokens
from euler.errors import EulerError, Unauthorized

CREDENTIAL_PREFIX = "euler_node_"
ENROLLMENT_PREFIX = "euler_enroll_"


@lru_cache(maxsize=16)
def _networks(spec: tuple[str, ...]) -> tuple:
    return tuple(ipaddress.ip_network(item, strict=False) for item in spec)


def address_allowed(address: str | None, networks: tuple[str, ...] | list[str]) -> bool:
    return _address_allowed(address, tuple(networks))


@lru_cache(maxsize=4096)  # every node request asks it for a handful of addresses
def _address_allowed(address: str | None, networks: tuple[str, ...]) -> bool:
    """Whether a client address may use plain HTTP: it lies in one of the configured networks."""
    if not address:
        return False
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if ip.version == 6 and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip in net for net in _networks(tuple(networks)) if net.version == ip.version)


def bearer(header: str | None) -> str | None:
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()


def node_for_credential(raw: str):
    """The node a credential belongs to, or None (unknown, revoked, rotated away). One query."""
    from nodes.models import Node

    lookup = tokens.split(CREDENTIAL_PREFIX, raw)
    if lookup is None:
        return None
    try:
        node = Node.objects.get(credential_lookup=lookup)  # unique: no ORDER BY/LIMIT as first() would add
    except Node.DoesNotExist:
        return None
    if not tokens.matches(raw, node.credential_digest):
        return None
    return node


class NodeRejected(EulerError):
    code = "node_rejected"
    status_code = 401
    message = "This node was rejected by an operator."


def authenticate_node(raw: str | None, *, who: str | None = None):
    """The node behind a presented credential, or the 401 that says why not. With `who` (the client
    address), failed guesses are counted and past EULER_AUTH_FAILURES_PER_MINUTE every try answers 429."""
    from euler import ratelimit

    if raw is None:
        raise Unauthorized("Send the node credential as 'Authorization: Bearer euler_node_…'.", code="no_credential")
    limit, window = ratelimit.auth_failure_limit()
    if who is not None:
        ratelimit.check("node", who, limit=limit, window=window)
    node = node_for_credential(raw)
    if node is None:
        if who is not None:
            ratelimit.spend("node", who, window=window)
        raise Unauthorized("The node credential is unknown or revoked.", code="invalid_node_credential")
    if node.approval == "rejected":
        raise NodeRejected()
    return node
