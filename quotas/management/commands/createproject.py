from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from euler.errors import EulerError
from quotas.services import project_create


class Command(BaseCommand):
    help = "Create a project (with the free quota); prints the project's slug as the last line."

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument("--owner", help="username of the owner")

    def handle(self, *args, name, owner=None, **options):
        user = None
        if owner:
            user = get_user_model().objects.filter(username=owner).first()
            if user is None:
                raise CommandError(f"no user named {owner!r}")
        try:
            project = project_create(name=name, owner=user)
        except EulerError as exc:
            raise CommandError(exc.message) from None
        self.stderr.write(f"created project {project.name!r} (id {project.pk})")
        self.stdout.write(project.slug)
