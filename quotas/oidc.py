"""OIDC login (mozilla-django-oidc): the first login creates the user and a default project."""

from __future__ import annotations

import re

import jwt
import requests
from django.contrib.auth import get_user_model
from django.core.exceptions import SuspiciousOperation
from django.db import transaction
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from quotas.services import default_project_for

_SAFE = re.compile(r"[^\w.@+-]")


class EulerOIDCBackend(OIDCAuthenticationBackend):
    def filter_users_by_claims(self, claims):
        sub = claims.get("sub")
        if not sub:
            return self.UserModel.objects.none()
        return self.UserModel.objects.filter(oidc_identity__subject=sub)

    def retrieve_matching_jwk(self, token):
        header = jwt.get_unverified_header(token)
        if "kid" in header:
            return super().retrieve_matching_jwk(token)
        # Some providers sign with a single key and omit `kid`: accept only an unambiguous match.
        response = requests.get(
            self.OIDC_OP_JWKS_ENDPOINT,
            verify=self.get_settings("OIDC_VERIFY_SSL", True),
            timeout=self.get_settings("OIDC_TIMEOUT", 10),
        )
        response.raise_for_status()
        candidates = [
            k for k in response.json().get("keys", []) if k.get("alg", header.get("alg")) == header.get("alg")
        ]
        if len(candidates) != 1:
            raise SuspiciousOperation("The ID token names no key (kid) and the provider has several.")
        return jwt.PyJWK(candidates[0])

    def verify_claims(self, claims) -> bool:
        return bool(claims.get("sub"))

    def _username_for(self, claims) -> str:
        base = claims.get("preferred_username") or (claims.get("email") or "").split("@")[0] or "user"
        base = _SAFE.sub("", base)[:120] or "user"
        User = get_user_model()
        name, n = base, 1
        while User.objects.filter(username=name).exists():
            n += 1
            name = f"{base}{n}"
        return name

    @transaction.atomic
    def create_user(self, claims):
        from quotas.models import OidcIdentity

        user = self.UserModel.objects.create_user(
            username=self._username_for(claims),
            email=claims.get("email", ""),
            first_name=(claims.get("given_name") or "")[:150],
            last_name=(claims.get("family_name") or "")[:150],
        )
        OidcIdentity.objects.create(user=user, subject=claims["sub"])
        default_project_for(user)
        return user

    def update_user(self, user, claims):
        return user
