from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "audit"
    verbose_name = "Audit trail"

    def ready(self) -> None:
        from audit import receivers  # noqa: F401 - connects the login signals
