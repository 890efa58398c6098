"""One-time secrets (API keys, enrollment tokens, node credentials, invitations): made, hashed, checked.

A secret looks like `<kind prefix><random>`. The first LOOKUP_LEN characters of the random part
are stored in clear as the lookup prefix; the whole secret is stored only as its SHA-256.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

LOOKUP_LEN = 12


@dataclass(frozen=True)
class NewSecret:
    secret: str
    lookup: str
    digest: str


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def make(kind_prefix: str, nbytes: int = 32) -> NewSecret:
    body = secrets.token_urlsafe(nbytes)
    secret = kind_prefix + body
    return NewSecret(secret=secret, lookup=body[:LOOKUP_LEN], digest=digest(secret))


def split(kind_prefix: str, presented: str) -> str | None:
    """The lookup prefix of a presented secret, or None when it cannot be one of ours."""
    if not presented or not presented.startswith(kind_prefix) or len(presented) > 512:
        return None
    body = presented[len(kind_prefix) :]
    if len(body) < LOOKUP_LEN + 8:
        return None
    return body[:LOOKUP_LEN]


def matches(presented: str, stored_digest: str) -> bool:
    return hmac.compare_digest(digest(presented), stored_digest)
