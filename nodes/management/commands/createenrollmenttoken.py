from django.core.management.base import CommandError

from audit.commands import AuditedCommand
from euler.errors import EulerError
from nodes.models import TrustLevel
from nodes.services import enrollment_token_create
from quotas.models import Project


class Command(AuditedCommand):
    help = "Create a one-time enrollment token; prints the token alone as the last line."

    def add_arguments(self, parser):
        parser.add_argument("--project", help="owner project name (a user-contributed node); omit for a platform node")
        parser.add_argument("--trust", choices=TrustLevel.values, help="intended trust level")
        parser.add_argument("--ttl", type=int, help="lifetime in seconds (default EULER_ENROLLMENT_TOKEN_TTL)")
        parser.add_argument("--region", default="")
        parser.add_argument("--label", default="", help="a note to recognise the token by")
        parser.add_argument("--auto-approve", action="store_true", help="development only (DJANGO_DEBUG=true)")

    def handle(self, *args, **opts):
        project = None
        if opts["project"]:
            project = Project.objects.filter(name=opts["project"]).first()
            if project is None:
                raise CommandError(f"no project named {opts['project']!r}")
        trust = opts["trust"] or (TrustLevel.UNTRUSTED if project else TrustLevel.PLATFORM)
        try:
            token, secret = enrollment_token_create(
                project=project,
                trust=trust,
                ttl=opts["ttl"],
                region=opts["region"],
                label=opts["label"],
                auto_approve=opts["auto_approve"],
            )
        except EulerError as exc:
            raise CommandError(exc.message) from None
        owner = project.name if project else "the platform"
        self.stderr.write(
            f"enrollment token for {owner} ({trust}), expires {token.expires_at:%Y-%m-%d %H:%M:%S} UTC; shown once:"
        )
        self.stdout.write(secret)
