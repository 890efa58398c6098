"""Webhook signatures, pure: HMAC-SHA256 over `timestamp.body`, in the manner of Stripe and GitHub.

Header: `Euler-Signature: t=<unix seconds>,v1=<hex digest>`. A receiver recomputes
`hmac_sha256(secret, f"{t}.".encode() + body)`, compares in constant time, and refuses a `t` older than a few
minutes (replays). `verify()` is the reference receiver, used by the tests and shown in docs/api.md.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

HEADER = "Euler-Signature"
SECRET_PREFIX = "whsec_"
TOLERANCE = 300  # seconds a receiver should accept


def new_secret() -> str:
    return SECRET_PREFIX + secrets.token_urlsafe(32)


def signature(secret: str, timestamp: int, body: bytes) -> str:
    return hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def header(secret: str, timestamp: int, body: bytes) -> str:
    return f"t={timestamp},v1={signature(secret, timestamp, body)}"


def verify(secret: str, header_value: str, body: bytes, *, now: int, tolerance: int = TOLERANCE) -> bool:
    """True when the header signs `body` with `secret` and its timestamp is within `tolerance` of `now`."""
    fields: dict[str, list[str]] = {}
    for part in (header_value or "").split(","):
        key, _, value = part.strip().partition("=")
        fields.setdefault(key, []).append(value)
    try:
        timestamp = int(fields.get("t", [""])[0])
    except ValueError:
        return False
    if abs(now - timestamp) > tolerance:
        return False
    expected = signature(secret, timestamp, body)
    return any(hmac.compare_digest(expected, candidate) for candidate in fields.get("v1", []))
