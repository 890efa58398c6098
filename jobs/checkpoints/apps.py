from django.apps import AppConfig


class CheckpointsConfig(AppConfig):
    name = "jobs.checkpoints"
    label = "checkpoints"
    verbose_name = "Job checkpoints"

    def ready(self) -> None:
        from jobs.checkpoints import receivers  # noqa: F401 - a deleted blob row takes its stored bytes
