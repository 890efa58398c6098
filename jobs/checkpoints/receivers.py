"""A deleted blob row takes its stored bytes with it once the deleting transaction commits (retention, a job's
deletion): never an orphan in the store, never bytes gone under a row a rolled-back transaction kept."""

from __future__ import annotations

from django.db import transaction
from django.db.models.signals import post_delete
from django.dispatch import receiver

from jobs.checkpoints.models import CheckpointBlob
from jobs.outputs.receivers import _delete


@receiver(post_delete, sender=CheckpointBlob, dispatch_uid="checkpoints.delete_stored")
def delete_stored(sender, instance: CheckpointBlob, **kwargs) -> None:
    key = instance.storage_key
    transaction.on_commit(lambda: _delete(key))
