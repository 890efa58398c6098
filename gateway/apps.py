from django.apps import AppConfig
from django.core.exceptions import ObjectDoesNotExist
from django.db.models.signals import post_delete, post_save


def _agent_changed(sender, instance, **kwargs) -> None:
    from gateway import routes

    routes.forget(instance.project_id, instance.name)


def _instance_changed(sender, instance, **kwargs) -> None:
    from gateway import routes

    try:
        agent = instance.agent  # the instance's own agent: no lookup by an id a caller gave
    except ObjectDoesNotExist:
        return
    routes.forget(agent.project_id, agent.name)


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
