from django.core.management.base import CommandError

from audit.commands import AuditedCommand
from euler.errors import EulerError
from quotas.models import Project
from quotas.services import apikey_create


class Command(AuditedCommand):
    help = "Create a project API key; prints the secret alone as the last line (shown once)."

    def add_arguments(self, parser):
        parser.add_argument("--project", required=True, help="project name or slug")
        parser.add_argument("--label", default="")
        parser.add_argument(
            "--role",
            choices=["owner", "member"],
            default="owner",
            help="an operator's key has no creator (default owner)",
        )

    def handle(self, *args, project, label, role="owner", **options):
        found = Project.objects.filter(name=project).first() or Project.objects.filter(slug=project).first()
        if found is None:
            raise CommandError(f"no project named {project!r}")
        try:
            key, secret = apikey_create(project=found, label=label, role=role)
        except EulerError as exc:
            raise CommandError(exc.message) from None
        self.stderr.write(f"created API key {key.pk} for project {found.name!r}; store it now, it is shown once")
        self.stdout.write(secret)
