"""AES-GCM encryption at rest: a key ring from EULER_ENCRYPTION_KEYS and encrypted model fields."""

from __future__ import annotations

import base64
import binascii
import json
import os
from dataclasses import dataclass
from functools import lru_cache

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import models

MAGIC = "eg1"  # ciphertext format: eg1:<key id>:<base64(nonce + ciphertext + tag)>


class DecryptionError(Exception):
    """A ciphertext could not be authenticated with any known key."""


@dataclass(frozen=True)
class KeyRing:
    keys: tuple[tuple[str, bytes], ...]  # the first one encrypts

    @classmethod
    def parse(cls, spec: str) -> KeyRing:
        keys: list[tuple[str, bytes]] = []
        for item in spec.split(","):
            item = item.strip()
            if not item:
                continue
            key_id, sep, b64 = item.partition(":")
            if not sep or not key_id or ":" in b64 or not key_id.replace("-", "").replace("_", "").isalnum():
                raise ImproperlyConfigured("EULER_ENCRYPTION_KEYS must be comma-separated id:base64key pairs")
            try:
                key = base64.b64decode(b64, validate=True)
            except (binascii.Error, ValueError):
                raise ImproperlyConfigured(f"EULER_ENCRYPTION_KEYS: key {key_id!r} is not valid base64") from None
            if len(key) not in (16, 24, 32):
                raise ImproperlyConfigured(f"EULER_ENCRYPTION_KEYS: key {key_id!r} must be 16, 24 or 32 bytes")
            if any(existing == key_id for existing, _ in keys):
                raise ImproperlyConfigured(f"EULER_ENCRYPTION_KEYS: key id {key_id!r} appears twice")
            keys.append((key_id, key))
        if not keys:
            raise ImproperlyConfigured("EULER_ENCRYPTION_KEYS holds no key")
        return cls(tuple(keys))

    @property
    def primary_id(self) -> str:
        return self.keys[0][0]

    def encrypt(self, plaintext: bytes, aad: bytes) -> str:
        key_id, key = self.keys[0]
        nonce = os.urandom(12)
        sealed = AESGCM(key).encrypt(nonce, plaintext, aad)
        return f"{MAGIC}:{key_id}:{base64.b64encode(nonce + sealed).decode()}"

    def decrypt(self, token: str, aad: bytes) -> bytes:
        try:
            magic, key_id, b64 = token.split(":", 2)
            blob = base64.b64decode(b64, validate=True)
        except (ValueError, binascii.Error):
            raise DecryptionError("malformed ciphertext") from None
        if magic != MAGIC or len(blob) < 12 + 16:
            raise DecryptionError("malformed ciphertext")
        for candidate_id, key in self.keys:
            if candidate_id != key_id:
                continue
            try:
                return AESGCM(key).decrypt(blob[:12], blob[12:], aad)
            except InvalidTag:
                raise DecryptionError("ciphertext failed authentication") from None
        raise DecryptionError(f"no key with id {key_id!r} in EULER_ENCRYPTION_KEYS")

    def key_id_of(self, token: str) -> str | None:
        parts = token.split(":", 2)
        return parts[1] if len(parts) == 3 and parts[0] == MAGIC else None


@lru_cache(maxsize=4)
def _ring(spec: str) -> KeyRing:
    return KeyRing.parse(spec)


def keyring() -> KeyRing:
    return _ring(settings.EULER_ENCRYPTION_KEYS)


def encrypt_str(value: str, aad: str) -> str:
    return keyring().encrypt(value.encode(), aad.encode())


def decrypt_str(token: str, aad: str) -> str:
    return keyring().decrypt(token, aad.encode()).decode()


class EncryptedField(models.TextField):
    """Stores a JSON-serialisable value AES-GCM encrypted; the AAD binds it to model and field.

    The AAD is `app_label.Model.field`, so a ciphertext copied into another column or
    table does not decrypt.
    """

    description = "AES-GCM encrypted JSON value"

    def aad(self) -> bytes:
        return f"{self.model._meta.label}.{self.name}".encode()

    def get_prep_value(self, value):
        if value is None:
            return None
        return keyring().encrypt(json.dumps(value, separators=(",", ":")).encode(), self.aad())

    def from_db_value(self, value, expression, connection):
        if value is None:
            return None
        return json.loads(keyring().decrypt(value, self.aad()))

    def to_python(self, value):
        return value

    def get_internal_type(self) -> str:
        return "TextField"

    def value_to_string(self, obj) -> str:
        # Never serialise the plaintext (dumpdata, admin history).
        return "<encrypted>"


def encrypted_fields():
    """Every (model, field) pair that holds ciphertext, for key rotation."""
    from django.apps import apps

    for model in apps.get_models():
        for field in model._meta.concrete_fields:
            if isinstance(field, EncryptedField):
                yield model, field
