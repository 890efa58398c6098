"""`manage.py restore DIR`: load a backup made by `manage.py backup` into an empty database."""

from django.core.management.base import BaseCommand, CommandError

from euler.backup import BackupError, pending_migrations, restore, restore_outputs


class Command(BaseCommand):
    help = (
        "Restore a backup directory into the empty database DATABASE_URL names. Refuses, touching nothing, when"
        " EULER_ENCRYPTION_KEYS lacks a key the backup needs or the database is not empty."
    )
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("directory")

    def handle(self, *args, directory, **options):
        try:
            manifest = restore(directory)
        except BackupError as exc:
            raise CommandError(f"restore refused: {exc}") from None
        self.stdout.write(f"restored the backup of {manifest.created_at} ({manifest.engine})")
        copied = restore_outputs(directory)
        if copied:
            self.stdout.write(f"job outputs: {copied} files put back into the filesystem store")
        pending = pending_migrations(manifest)
        if pending:
            self.stdout.write(f"{len(pending)} newer migration(s) to apply: run `manage.py migrate` before starting")
