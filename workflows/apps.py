from django.apps import AppConfig


class WorkflowsConfig(AppConfig):
    name = "workflows"

    def ready(self) -> None:
        from euler import retention
        from jobs.signals import events_written
        from workflows import nudge, receivers, tasks  # noqa: F401 - registers the tasks and the membership receiver
        from workflows.retention import purge_schedule_runs

        events_written.connect(nudge.on_events_written, dispatch_uid="workflows.dispatch_nudge")
        from django.db.models.signals import post_delete, post_save

        from workflows.models import Webhook

        post_save.connect(nudge.hooks_changed, sender=Webhook, dispatch_uid="workflows.hooks_changed")
        post_delete.connect(nudge.hooks_changed, sender=Webhook, dispatch_uid="workflows.hooks_deleted")

        retention.register("schedule_runs", days_setting="EULER_SCHEDULE_RUN_RETENTION_DAYS", purge=purge_schedule_runs)
