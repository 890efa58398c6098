from django.core.management.base import CommandError
from django.db import transaction

import audit
from audit.commands import AuditedCommand
from quotas.models import Project, Quota

FIELDS = {
    "cpu_core_seconds": "cpu_core_seconds",
    "gpu_seconds": "gpu_seconds",
    "invocations": "invocations",
    "concurrent_jobs": "max_concurrent_jobs",
    "api_keys": "max_api_keys",
}


class Command(AuditedCommand):
    help = "Set a project's quota; prints the resulting quota."

    def add_arguments(self, parser):
        parser.add_argument("project", help="project name or slug")
        for flag in FIELDS:
            parser.add_argument(f"--{flag.replace('_', '-')}", type=int, dest=flag, metavar="N")

    def handle(self, *args, project, **options):
        found = Project.objects.filter(name=project).first() or Project.objects.filter(slug=project).first()
        if found is None:
            raise CommandError(f"no project named {project!r}")
        changes = {field: options[flag] for flag, field in FIELDS.items() if options.get(flag) is not None}
        if any(v < 0 for v in changes.values()):
            raise CommandError("quota values cannot be negative")
        if changes:
            with transaction.atomic():
                Quota.objects.filter(project=found).update(**changes)
                audit.record("quota.changed", project=found, target=f"project:{found.name}", details=changes)
        q = Quota.objects.get(project=found)
        self.stdout.write(
            f"{found.name}: cpu_core_seconds={q.cpu_core_seconds} gpu_seconds={q.gpu_seconds} "
            f"invocations={q.invocations} concurrent_jobs={q.max_concurrent_jobs} api_keys={q.max_api_keys}"
        )
