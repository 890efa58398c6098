import base64
import os

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.db import connection
from django.test import override_settings

from euler.crypto import DecryptionError, KeyRing, keyring
from tests.testapp.models import Secretive

pytestmark = pytest.mark.django_db


def _key() -> str:
    return base64.b64encode(os.urandom(32)).decode()


def _raw(pk: int, column: str = "payload") -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {column} FROM testapp_secretive WHERE id = %s", [pk])
        return cursor.fetchone()[0]


def test_a_value_round_trips_and_the_row_holds_no_plaintext():
    row = Secretive.objects.create(payload={"TOKEN": "hunter2-very-secret"})
    assert Secretive.objects.get(pk=row.pk).payload == {"TOKEN": "hunter2-very-secret"}
    stored = _raw(row.pk)
    assert "hunter2" not in stored
    assert stored.startswith(f"eg1:{keyring().primary_id}:")


def test_two_encryptions_of_one_value_differ():
    a = Secretive.objects.create(payload="same")
    b = Secretive.objects.create(payload="same")
    assert _raw(a.pk) != _raw(b.pk)


def test_a_tampered_ciphertext_is_refused():
    row = Secretive.objects.create(payload="x")
    stored = _raw(row.pk)
    magic, key_id, b64 = stored.split(":", 2)
    blob = bytearray(base64.b64decode(b64))
    blob[-1] ^= 1
    tampered = f"{magic}:{key_id}:{base64.b64encode(bytes(blob)).decode()}"
    with connection.cursor() as cursor:
        cursor.execute("UPDATE testapp_secretive SET payload = %s WHERE id = %s", [tampered, row.pk])
    with pytest.raises(DecryptionError):
        Secretive.objects.get(pk=row.pk)


def test_a_ciphertext_moved_to_another_column_does_not_decrypt():
    row = Secretive.objects.create(payload="bound")
    with connection.cursor() as cursor:
        cursor.execute("UPDATE testapp_secretive SET other = payload WHERE id = %s", [row.pk])
    with pytest.raises(DecryptionError):
        Secretive.objects.values_list("other", flat=True).get(pk=row.pk)


def test_rotation_reencrypts_with_the_new_key_and_old_keys_still_decrypt(settings):
    old = settings.EULER_ENCRYPTION_KEYS
    row = Secretive.objects.create(payload={"v": 1})
    new_id = "rot2"
    with override_settings(EULER_ENCRYPTION_KEYS=f"{new_id}:{_key()},{old}"):
        assert Secretive.objects.get(pk=row.pk).payload == {"v": 1}  # old key still decrypts
        call_command("rotate_encryption_keys", stdout=open(os.devnull, "w"))
        assert _raw(row.pk).startswith(f"eg1:{new_id}:")
        assert Secretive.objects.get(pk=row.pk).payload == {"v": 1}
    # Without the new key the rotated value no longer decrypts: it really moved.
    with pytest.raises(DecryptionError):
        Secretive.objects.get(pk=row.pk)


def test_none_stays_null():
    row = Secretive.objects.create(payload=None)
    assert _raw(row.pk) is None
    assert Secretive.objects.get(pk=row.pk).payload is None


@pytest.mark.parametrize(
    "spec",
    # Fixed keys for the duplicate id: a test's id is the same in every pytest-xdist worker's collection.
    ["", "nokey", "a:notbase64!!", "a:" + base64.b64encode(b"short").decode(),
     "a:" + base64.b64encode(b"\x01" * 32).decode() + ",a:" + base64.b64encode(b"\x02" * 32).decode()],
)  # fmt: skip
def test_a_bad_key_spec_is_refused_with_a_clear_message(spec):
    with pytest.raises(ImproperlyConfigured, match="EULER_ENCRYPTION_KEYS"):
        KeyRing.parse(spec)
