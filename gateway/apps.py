from django.apps import AppConfig
from django.db.models.signals import post_delete, post_save


def _agent_changed(sender, instance, **kwargs) -> None:
    from gateway import routes

    routes.forget(instance.project_id, instance.name)


def _instance_changed(sender, instance, **kwargs) -> None:
    from agents.models import Agent
    from gateway import routes

    agent = Agent.objects.filter(pk=instance.agent_id).values_list("project_id", "name").first()
    if agent is not None:
        routes.forget(*agent)


class GatewayConfig(AppConfig):
    name = "gateway"

    def ready(self) -> None:
        # A route this process cached must not outlive the agent it was loaded from (gateway/routes.forget).
        from agents.models import Agent, AgentInstance

        for signal in (post_save, post_delete):
            signal.connect(_agent_changed, sender=Agent, dispatch_uid=f"gateway-route-agent-{signal is post_save}")
            signal.connect(
                _instance_changed, sender=AgentInstance, dispatch_uid=f"gateway-route-instance-{signal is post_save}"
            )
