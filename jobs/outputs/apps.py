from django.apps import AppConfig


class OutputsConfig(AppConfig):
    name = "jobs.outputs"
    label = "outputs"
    verbose_name = "Job outputs"

    def ready(self) -> None:
        from jobs.outputs import receivers, tasks  # noqa: F401 - storage cleanup on delete; the retention task
