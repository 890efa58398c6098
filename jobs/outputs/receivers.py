"""A deleted output row takes its stored file with it, after the deleting transaction commits (retention, a
replaced attempt's files, a deleted job or project): never an orphan in the store, never a file gone under a row
that a rolled-back transaction kept."""

from __future__ import annotations

import logging

from django.db import transaction
from django.db.models.signals import post_delete
from django.dispatch import receiver

from jobs.outputs import store
from jobs.outputs.models import OutputFile

log = logging.getLogger(__name__)


def _delete(key: str) -> None:
    try:
        store.delete(key)
    except Exception:  # noqa: BLE001 - a store hiccup must not fail the delete; the key is logged to clean by hand
        log.warning("could not delete stored output %s", key, exc_info=True)


@receiver(post_delete, sender=OutputFile, dispatch_uid="outputs.delete_stored")
def delete_stored(sender, instance: OutputFile, **kwargs) -> None:
    key = instance.storage_key
    transaction.on_commit(lambda: _delete(key))
