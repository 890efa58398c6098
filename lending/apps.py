from django.apps import AppConfig


class LendingConfig(AppConfig):
    name = "lending"

    def ready(self) -> None:
        from jobs.signals import attempt_ended
        from lending import receivers, tasks  # noqa: F401 - tasks registers them in every process

        attempt_ended.connect(receivers.on_attempt_ended, dispatch_uid="lending.ledger")
