"""OIDC login (mozilla-django-oidc): the first login creates the user and a default project."""

from __future__ import annotations

import re

from django.contrib.auth import get_user_model
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
