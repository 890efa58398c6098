"""`manage.py backup DIR`: a consistent dump of the database and its manifest (see euler/backup.py)."""

from django.core.management.base import BaseCommand, CommandError

from euler.backup import BackupError, backup, backup_outputs


class Command(BaseCommand):
    help = (
        "Write a consistent dump of the database into DIR (new or empty) with manifest.json: schema version,"
        " time and the ids of the encryption keys it needs. The keys themselves are never written: keep"
        " EULER_ENCRYPTION_KEYS apart from the backup."
    )

    def add_arguments(self, parser):
        parser.add_argument("directory")

    def handle(self, *args, directory, **options):
        try:
            manifest = backup(directory)
        except BackupError as exc:
            raise CommandError(str(exc)) from None
        copied = backup_outputs(directory)
        if copied:
            self.stdout.write(f"job outputs: {copied} files copied from the filesystem store")
        keys = ", ".join(manifest.encryption_key_ids) or "none"
        self.stdout.write(f"backup written to {directory} ({manifest.engine}, {manifest.created_at})")
        self.stdout.write(f"it needs these encryption keys to restore (keep them apart from it): {keys}")
        lacking = sorted(set(manifest.encryption_key_ids) - set(manifest.key_checks))
        if lacking:
            self.stderr.write(f"warning: EULER_ENCRYPTION_KEYS lacks {', '.join(lacking)}: values under it are lost")
