"""Who is acting: set once per request (middleware, API-key auth) or per command, read by audit.record.

The holder is a mutable object in a context variable, so what DRF's authentication learns later in the
request (an API key) is seen by the services it calls, whatever thread Django runs the view in.
"""

from __future__ import annotations

import contextvars
import ipaddress
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from euler.middleware import ContextVarMiddleware

SYSTEM = "system"
ANONYMOUS = "anonymous"


@dataclass
class Caller:
    actor: str | None = None  # explicit: an API key, a node, a command's --as; else read from request.user
    ip: str | None = None
    request: Any = None


_caller: contextvars.ContextVar[Caller | None] = contextvars.ContextVar("euler_audit_caller", default=None)


def user_actor(user) -> str | None:
    """`user:<username>` for a real Django user, None for anything else (anonymous, an API-key caller)."""
    if user is None or not getattr(user, "pk", None) or not getattr(user, "is_authenticated", False):
        return None
    return f"user:{user.get_username()}"


def clean_ip(raw: str | None) -> str | None:
    try:
        return str(ipaddress.ip_address((raw or "").strip()))
    except ValueError:
        return None


def current() -> Caller | None:
    return _caller.get()


def set_actor(actor: str) -> None:
    """Name the actor of the current request (no-op outside one: it must never leak into the next)."""
    caller = _caller.get()
    if caller is not None:
        caller.actor = actor


def resolve(*, actor: str | None = None, by=None) -> tuple[str, str | None]:
    """The actor and client address for an event: explicit actor, then a real `by` user, then the context."""
    caller = _caller.get()
    ip = caller.ip if caller is not None else None
    if actor:
        return actor, ip
    named = user_actor(by)
    if named:
        return named, ip
    if caller is None:
        return SYSTEM, None
    if caller.actor:
        return caller.actor, ip
    if caller.request is not None:
        return user_actor(getattr(caller.request, "user", None)) or ANONYMOUS, ip
    return SYSTEM, ip


@contextmanager
def acting(actor: str = SYSTEM, *, ip: str | None = None):
    """Everything recorded inside is attributed to `actor` (management commands, tasks, tests)."""
    token = _caller.set(Caller(actor=actor, ip=clean_ip(ip)))
    try:
        yield
    finally:
        _caller.reset(token)


class AuditContextMiddleware(ContextVarMiddleware):
    """Holds the request for the audit context; place after authentication."""

    var = _caller

    def enter(self, request) -> Caller:
        from euler.ratelimit import client_ip

        return Caller(ip=clean_ip(client_ip(request)), request=request)
