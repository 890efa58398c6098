from django.apps import AppConfig


class NodeagentConfig(AppConfig):
    name = "nodeagent"
