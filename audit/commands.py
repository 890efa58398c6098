"""Management commands that change things record them: as `system`, or as the user named by `--as USER`."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from audit import context


class AuditedCommand(BaseCommand):
    """A BaseCommand whose writes are audited; adds `--as USER` to every such command."""

    def create_parser(self, prog_name, subcommand, **kwargs):
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parser.add_argument(
            "--as", dest="as_user", metavar="USER", help="username the audit trail names as actor (default: system)"
        )
        return parser

    def execute(self, *args, **options):
        username = options.get("as_user")
        actor = context.SYSTEM
        if username:
            user = get_user_model().objects.filter(username=username).first()
            if user is None:
                raise CommandError(f"--as: no user named {username!r}")
            actor = context.user_actor(user)
        with context.acting(actor):
            return super().execute(*args, **options)
