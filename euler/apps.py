from django.apps import AppConfig


class EulerConfig(AppConfig):
    name = "euler"
    verbose_name = "Euler"

    def ready(self) -> None:
        from django.urls import register_converter

        from euler.converters import IdConverter

        register_converter(IdConverter, "id")  # before any URLconf (HTTP or websocket) is loaded
