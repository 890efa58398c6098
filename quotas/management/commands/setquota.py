from django.core.management.base import CommandError
from django.db import transaction

import audit
from audit.commands import AuditedCommand
from quotas.models import MAX_WEIGHT, Project, Quota

FIELDS = {
    "cpu_core_seconds": "cpu_core_seconds",
    "gpu_seconds": "gpu_seconds",
    "invocations": "invocations",
    "concurrent_jobs": "max_concurrent_jobs",
    "api_keys": "max_api_keys",
    "schedules": "max_schedules",
    "schedule_min_period": "schedule_min_period",
    "schedule_runs_per_minute": "schedule_runs_per_minute",
}


class Command(AuditedCommand):
    help = "Set a project's quota; prints the resulting quota."

    def add_arguments(self, parser):
        parser.add_argument("project", help="project name or slug")
        for flag in FIELDS:
            parser.add_argument(f"--{flag.replace('_', '-')}", type=int, dest=flag, metavar="N")
        parser.add_argument("--weight", type=float, metavar="W", help=f"fair-share weight, >0 and <= {MAX_WEIGHT:g}")

    def handle(self, *args, project, **options):
        found = Project.objects.filter(name=project).first() or Project.objects.filter(slug=project).first()
        if found is None:
            raise CommandError(f"no project named {project!r}")
        changes = {field: options[flag] for flag, field in FIELDS.items() if options.get(flag) is not None}
        if any(v < 0 for v in changes.values()):
            raise CommandError("quota values cannot be negative")
        if changes.get("schedule_min_period", 60) < 60:
            raise CommandError("the schedule minimum period is at least 60 seconds (cron's finest step)")
        weight = options.get("weight")
        if weight is not None and not (0 < weight <= MAX_WEIGHT):  # NaN fails too
            raise CommandError(f"the weight must be above 0 and at most {MAX_WEIGHT:g}")
        if changes or weight is not None:
            with transaction.atomic():
                if changes:
                    Quota.objects.filter(project=found).update(**changes)
                if weight is not None:
                    Project.objects.filter(pk=found.pk).update(weight=weight)
                    found.weight = weight
                details = {**changes, **({"weight": weight} if weight is not None else {})}
                audit.record("quota.changed", project=found, target=f"project:{found.name}", details=details)
        q = Quota.objects.get(project=found)
        self.stdout.write(
            f"{found.name}: cpu_core_seconds={q.cpu_core_seconds} gpu_seconds={q.gpu_seconds} "
            f"invocations={q.invocations} concurrent_jobs={q.max_concurrent_jobs} api_keys={q.max_api_keys} "
            f"schedules={q.max_schedules} schedule_min_period={q.schedule_min_period} "
            f"schedule_runs_per_minute={q.schedule_runs_per_minute} weight={found.weight:g}"
        )
