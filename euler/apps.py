from django.apps import AppConfig


class EulerConfig(AppConfig):
    name = "euler"
    verbose_name = "Euler"
