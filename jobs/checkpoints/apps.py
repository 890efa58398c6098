from django.apps import AppConfig


class CheckpointsConfig(AppConfig):
    name = "jobs.checkpoints"
    label = "checkpoints"
    verbose_name = "Job checkpoints"

    def ready(self) -> None:
        from jobs.checkpoints import receivers, tasks  # noqa: F401 - stored bytes go with their row; retention
