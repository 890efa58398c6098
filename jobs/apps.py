from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"

    def ready(self) -> None:
        from euler import metrics, retention
        from jobs import (
            gauges,
            node_hooks,
            receivers,
            tasks,  # noqa: F401 - registers the tasks that jobs.wakeups sends by name, in every process
        )
        from jobs.retention import purge_jobs
        from nodes import channel, signals

        metrics.register_gauges(gauges.job_gauges)
        retention.register("jobs", days_setting="EULER_JOB_RETENTION_DAYS", purge=purge_jobs)
        channel.register_poll_provider(node_hooks.poll_provider)
        channel.register_busy_provider(node_hooks.poll_provider, node_hooks.busy_nodes)
        channel.register_heartbeat_hook(node_hooks.heartbeat_hook)
        signals.node_offline.connect(receivers.on_node_offline, dispatch_uid="jobs.node_offline")
        signals.node_available.connect(receivers.on_node_available, dispatch_uid="jobs.node_available")
        signals.node_reclaimed.connect(receivers.on_node_reclaimed, dispatch_uid="jobs.node_reclaimed")
