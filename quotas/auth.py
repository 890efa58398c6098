"""DRF authentication by project API key (X-Euler-API-Key)."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions

from audit import context as audit_context
from euler import ratelimit, tokens
from quotas.services import API_KEY_PREFIX, apikey_authenticate

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
    """The ApiKey behind `raw`, or None; every door that takes a key (API, gateway, websocket, logs) uses it.

    A valid key is always let in: its secret is 256 random bits, so no count of other clients' failures can
    be about it. A failure is counted against the presented key prefix (EULER_AUTH_FAILURES_PER_MINUTE) and,
    at a much higher rate, against the address (EULER_AUTH_FAILURES_PER_ADDRESS_PER_MINUTE), so one client's
    spray of bad keys does not lock out the good keys of everyone behind the same NAT. Past either limit the
    failure is answered RateLimited (429) instead of 401.
    """
    raw = raw.strip()
    key = apikey_authenticate(raw=raw)
    if key is not None:
        return key
    limit, window = ratelimit.auth_failure_limit()
    spends = []
    prefix = tokens.split(API_KEY_PREFIX, raw)
    if prefix is not None:
        spends.append(("apikey-prefix", prefix, limit))
    if who:
        spends.append(("apikey", who, ratelimit.auth_failure_address_limit()))
    if spends:
        ratelimit.spend_all(spends, window=window)
    return None


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
