"""DRF authentication by project API key (X-Euler-API-Key)."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions

from audit import context as audit_context
from euler import ratelimit
from quotas.services import apikey_authenticate

HEADER = "HTTP_X_EULER_API_KEY"


class InvalidApiKey(exceptions.AuthenticationFailed):
    default_code = "invalid_api_key"
    default_detail = "The API key is unknown or revoked."


class ApiKeyUser(AnonymousUser):
    """The caller behind an API key: not a Django user, but authenticated for the key's project."""

    @property
    def is_authenticated(self) -> bool:  # type: ignore[override]
        return True

    @property
    def is_anonymous(self) -> bool:  # type: ignore[override]
        return False

    def __str__(self) -> str:
        return "api-key"


def apikey_authenticate_limited(*, raw: str, who: str | None):
    """The ApiKey behind `raw`, or None. Failed guesses are counted per client address (`who`), one
    budget for every door that takes a key (API, gateway, websocket); past the limit: RateLimited (429)."""
    limit, window = ratelimit.auth_failure_limit()
    if who:
        ratelimit.check("apikey", who, limit=limit, window=window)
    key = apikey_authenticate(raw=raw.strip())
    if key is None and who:
        ratelimit.spend("apikey", who, window=window)
    return key


class ApiKeyAuthentication(authentication.BaseAuthentication):
    def authenticate(self, request):
        raw = request.META.get(HEADER)
        if raw is None:
            return None
        try:
            key = apikey_authenticate_limited(raw=raw, who=ratelimit.client_ip(request))
        except ratelimit.RateLimited as exc:
            raise exceptions.Throttled(wait=exc.extra["retry_after"]) from None
        if key is None:
            raise InvalidApiKey()
        audit_context.set_actor(f"api_key:{key.prefix}")
        return ApiKeyUser(), key

    def authenticate_header(self, request) -> str:
        return "X-Euler-API-Key"


class ApiKeySchema(OpenApiAuthenticationExtension):
    """Tells drf-spectacular that ApiKeyAuthentication is the `ApiKey` scheme of /api/schema/."""

    target_class = "quotas.auth.ApiKeyAuthentication"
    name = "ApiKey"

    def get_security_definition(self, auto_schema):
        return {"type": "apiKey", "in": "header", "name": "X-Euler-API-Key"}
