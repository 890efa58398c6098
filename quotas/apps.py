from django.apps import AppConfig


class QuotasConfig(AppConfig):
    name = "quotas"
    verbose_name = "Projects, keys and quotas"

    def ready(self) -> None:
        from quotas import receivers  # noqa: F401 - connects the membership receiver
