from django.apps import AppConfig


class WorkflowsConfig(AppConfig):
    name = "workflows"

    def ready(self) -> None:
        from euler import retention
        from workflows import receivers, tasks  # noqa: F401 - registers the tasks and the membership receiver
        from workflows.retention import purge_schedule_runs

        retention.register("schedule_runs", days_setting="EULER_SCHEDULE_RUN_RETENTION_DAYS", purge=purge_schedule_runs)
