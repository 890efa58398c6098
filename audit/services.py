"""The one function that records an audit event, and the scrubbing that keeps secrets out of `details`."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from django.db import transaction

from audit import context
from audit.models import Action, AuditEvent

REDACTED = "[redacted]"
# Keys whose values are secret whatever they hold; checked as whole words of the key.
_SECRET_WORDS = frozenset(
    {"secret", "password", "token", "key", "hash", "digest", "credential", "env", "authorization", "cookie"}
)
# Values that look like an Euler secret (API key, enrollment token, node credential, invitation) or a bearer.
_SECRET_VALUE = re.compile(r"euler_(?:pk|enroll|node|inv)_[A-Za-z0-9_-]{8,}|\bBearer\s+\S+", re.IGNORECASE)
_URL_USERINFO = re.compile(r"(?<=://)[^/@\s]+@")
_URL_QUERY = re.compile(r"(?<=[a-z]://)([^\s?#]*)\?[^\s#]*", re.IGNORECASE)  # a query may carry a token
_ALLOWED_KEYS = frozenset({"token_id", "key_id", "key_prefix", "prefix", "key_ids", "label"})
MAX_DETAIL_TEXT = 1000


def _url_key(key: str) -> bool:
    return "url" in re.split(r"[^a-z0-9]+", key.lower())


def origin_only(url: str) -> str:
    """A URL kept as its scheme and host (and port): a webhook's path and query may be its credential (Slack's
    /services/T…/B…/<token>, Discord's /api/webhooks/<id>/<token>), so they leave as [redacted]."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return REDACTED
    if not parts.scheme or not host:
        return REDACTED
    host = f"[{host}]" if ":" in host else host
    origin = f"{parts.scheme}://{host}" + (f":{port}" if port else "")
    rest = (parts.path not in ("", "/")) or parts.query or parts.fragment
    return origin + (f"/{REDACTED}" if rest else "")


def _secret_key(key: str) -> bool:
    if key in _ALLOWED_KEYS:
        return False
    words = re.split(r"[^a-z0-9]+", key.lower())
    return any(w in _SECRET_WORDS for w in words)


def scrub(value: Any, key: str = "") -> Any:
    """A JSON-able copy of `value` with secret-looking keys and values replaced by [redacted], and a URL under a
    `url` key (`url`, `base_url`) cut to its origin (origin_only)."""
    if key and _secret_key(key):
        return REDACTED
    if isinstance(value, dict):
        return {str(k): scrub(v, str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [scrub(v) for v in value]
    if isinstance(value, str) and key and _url_key(key):
        return origin_only(value[:MAX_DETAIL_TEXT])
    if isinstance(value, str):
        text = _SECRET_VALUE.sub(REDACTED, value[:MAX_DETAIL_TEXT])
        return _URL_QUERY.sub(r"\1?" + REDACTED, _URL_USERINFO.sub(REDACTED + "@", text))
    if value is None or isinstance(value, bool | int | float):
        return value
    return scrub(str(value))


def record(
    action: str,
    *,
    project=None,
    target: str = "",
    details: dict | None = None,
    actor: str | None = None,
    by=None,
) -> AuditEvent:
    """Record `action` on `target` ("<kind>:<id or name>") in `project`, inside the caller's transaction.

    The actor is `actor` when given, else the real user `by`, else whoever the request or command context
    names (`api_key:<prefix>`, `user:<name>`, `node:<name>`), else `system`.
    """
    if action not in Action.values:
        raise ValueError(f"unknown audit action {action!r}")
    who, ip = context.resolve(actor=actor, by=by)
    with transaction.atomic():  # joins the caller's transaction; alone, it is its own
        return AuditEvent.objects.create(
            action=action,
            actor=who[:200],
            ip=ip,
            project_id=getattr(project, "pk", project),
            target=str(target)[:300],
            details=scrub(details or {}),
        )
