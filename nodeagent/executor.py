"""Runs assignments as hardened containers on this host (skeleton; the full executor follows)."""

from __future__ import annotations

import logging
from pathlib import Path

from nodeagent import protocol


class Executor:
    def __init__(self, *, client, node_name: str, state_dir: Path, logger: logging.Logger | None = None):
        self.client = client
        self.node_name = node_name
        self.state_dir = Path(state_dir)
        self.log = logger or logging.getLogger("euler.nodeagent.executor")

    def adopt(self) -> None:
        """Called once after enrolling: take over the containers of our current attempts."""

    def running_attempts(self) -> list[protocol.RunningAttempt]:
        return []

    def handle_assignment(self, assignment: protocol.Assignment) -> None:
        self.log.info("assignment %s ignored (executor skeleton)", assignment.attempt_id)

    def handle_command(self, command: protocol.Command) -> None:
        self.log.info("command %s for attempt %s ignored (executor skeleton)", command.type, command.attempt_id)

    def tick(self) -> None:
        """Called about every 200 ms from the daemon's own thread."""

    def close(self) -> None:
        """Called on SIGTERM: stop shipping; containers keep running and are adopted after a restart."""
