"""A model used only by tests of the encrypted field."""

from django.db import models

from euler.crypto import EncryptedField


class Secretive(models.Model):
    label = models.CharField(max_length=50, default="")
    payload = EncryptedField(null=True)
    other = EncryptedField(null=True)

    class Meta:
        app_label = "testapp"
