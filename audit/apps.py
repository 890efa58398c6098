from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "audit"
    verbose_name = "Audit trail"

    def ready(self) -> None:
        from audit import receivers  # noqa: F401 - connects the login signals
        from audit.retention import purge_audit_events
        from euler import retention

        retention.register("audit_events", days_setting="EULER_AUDIT_RETENTION_DAYS", purge=purge_audit_events)
