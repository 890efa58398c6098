"""Sign-ins (password or OIDC) recorded through Django's auth signals; the credentials never are."""

from __future__ import annotations

from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.dispatch import receiver

from audit import context
from audit.services import record


def _ip(request) -> str | None:
    from euler.ratelimit import client_ip

    return context.clean_ip(client_ip(request)) if request is not None else None


def _method(request) -> str:
    path = getattr(request, "path", "") or ""
    return "oidc" if path.startswith("/oidc/") else "password"


@receiver(user_logged_in, dispatch_uid="audit.login_succeeded")
def login_succeeded(sender, request, user, **kwargs) -> None:
    with context.acting(context.user_actor(user) or context.ANONYMOUS, ip=_ip(request) if request else None):
        record("login.succeeded", target=f"user:{user.get_username()}", details={"method": _method(request)})


@receiver(user_login_failed, dispatch_uid="audit.login_failed")
def login_failed(sender, credentials, request=None, **kwargs) -> None:
    # Django masks the password in `credentials`; only the username (if any) is kept, never the rest.
    username = str((credentials or {}).get("username") or "")[:150]
    with context.acting(context.ANONYMOUS, ip=_ip(request)):
        record("login.failed", target=f"user:{username}" if username else "", details={"method": _method(request)})
