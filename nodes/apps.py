from django.apps import AppConfig


class NodesConfig(AppConfig):
    name = "nodes"

    def ready(self) -> None:
        from django.db.models.signals import post_delete, post_save

        from euler import metrics, retention
        from nodes import gauges, memory
        from nodes.models import Node
        from nodes.retention import purge_node_events

        metrics.register_gauges(gauges.node_gauges)
        # Node events go with the jobs they tell of: after the jobs' retention.
        retention.register("node_events", days_setting="EULER_JOB_RETENTION_DAYS", purge=purge_node_events)
        post_save.connect(memory.node_row_changed, sender=Node, dispatch_uid="nodes.row_changed")
        post_delete.connect(memory.node_row_deleted, sender=Node, dispatch_uid="nodes.row_deleted")
