"""What the daemon starts with: the runtime probe, and the executor (a Docker one, or a null one without an engine)."""

from __future__ import annotations

import logging

from nodeagent import protocol, state
from nodeagent.client import ControlPlaneClient
from nodeagent.config import AgentConfig

log = logging.getLogger("euler.nodeagent")


class NullExecutor:
    """Used when no Docker engine answers: the node heartbeats but accepts no work."""

    def adopt(self) -> None:
        pass

    def running_attempts(self) -> list[protocol.RunningAttempt]:
        return []

    def handle_assignment(self, assignment: protocol.Assignment) -> None:
        log.warning("no Docker engine: cannot run attempt %s", assignment.attempt_id)

    def handle_command(self, command: protocol.Command) -> None:
        pass

    def tick(self) -> None:
        pass

    def close(self) -> None:
        pass


def start_runtime_probe(config: AgentConfig):
    """The runtimes this node offers, probed now (before enrollment, so that the node enrolls with them and an
    approval pins them) and again after each engine restart; None without an engine."""
    try:
        import docker

        from nodeagent.runtimes import RuntimeProbe

        probe = RuntimeProbe(docker.from_env(), config.runtimes, owner=state.owner_id(config.state_dir))
    except Exception as exc:  # noqa: BLE001 - no engine: nothing offered, the node accepts no work anyway
        log.warning("cannot probe the engine's runtimes: %s", exc)
        return None
    probe.start()
    return probe


def build_executor(client: ControlPlaneClient, config: AgentConfig, docker_ok: bool, runtimes=None):
    if not docker_ok:
        log.warning("no Docker engine answers: this node heartbeats but accepts no work")
        return NullExecutor()
    try:
        from nodeagent.executor import Executor
    except ImportError:
        return NullExecutor()
    from nodeagent.egress import Egress
    from nodeagent.egress_plan import instance_id, names_for

    executor = Executor(
        client=client,
        node_name=config.name,
        state_dir=config.state_dir,
        logger=logging.getLogger("euler.nodeagent.executor"),
        images=config.images,
    )
    # The job network and its egress rules, before any container (adopted ones included) runs on it.
    instance = instance_id(url=config.url, node_name=config.name, state_dir=config.state_dir)
    egress = Egress(policy=config.network, names=names_for(instance, config.name), docker_client=executor.runner.client)
    egress.start()
    executor.egress = egress
    executor.runtimes = runtimes  # the runtimes offered (start_runtime_probe), checked before each start
    return executor
