from django.apps import AppConfig


class NodesConfig(AppConfig):
    name = "nodes"

    def ready(self) -> None:
        from django.db.models.signals import post_delete, post_save

        from euler import metrics
        from nodes import gauges, memory
        from nodes.models import Node

        metrics.register_gauges(gauges.node_gauges)
        post_save.connect(memory.node_row_changed, sender=Node, dispatch_uid="nodes.row_changed")
        post_delete.connect(memory.node_row_deleted, sender=Node, dispatch_uid="nodes.row_deleted")
