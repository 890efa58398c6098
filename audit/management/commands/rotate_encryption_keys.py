"""Re-encrypts every encrypted column with the first key of EULER_ENCRYPTION_KEYS."""

from django.db import transaction

import audit
from audit.commands import AuditedCommand
from euler.crypto import encrypted_fields, keyring


class Command(AuditedCommand):
    help = "Re-encrypt all encrypted values with the first (newest) key in EULER_ENCRYPTION_KEYS."

    def handle(self, *args, **options):
        ring = keyring()
        total = 0
        for model, field in encrypted_fields():
            raw = model._base_manager.exclude(**{f"{field.attname}__isnull": True}).values_list("pk", field.attname)
            # values_list runs from_db_value, so we hold plaintext; re-saving encrypts with the primary key.
            count = 0
            for pk, value in raw.iterator(chunk_size=500):
                with transaction.atomic():
                    model._base_manager.filter(pk=pk).update(**{field.attname: value})
                count += 1
            total += count
            self.stdout.write(f"{model._meta.label}.{field.name}: {count} re-encrypted")
        audit.record("encryption_keys.rotated", details={"key_id": ring.primary_id, "values": total})
        self.stdout.write(f"done: {total} values now under key {ring.primary_id!r}")
