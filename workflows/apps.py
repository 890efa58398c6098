from django.apps import AppConfig


class WorkflowsConfig(AppConfig):
    name = "workflows"

    def ready(self) -> None:
        from workflows import tasks  # noqa: F401 - registers the tasks in every process
