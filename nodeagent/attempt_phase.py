"""The phases of one attempt on this host and the moves allowed between them: a pure table (no I/O, no threads).

Only the attempt's owner thread (nodeagent/attempt_run.py) moves its phase, through `advance`; the threads that
read output, wait for the exit or stop the container, the heartbeat and the disk guard signal it instead.
"""

from __future__ import annotations

import enum


class Phase(enum.Enum):
    CREATED = "created"  # taken on: a fresh assignment, or a container adopted after an agent restart
    STARTING = "starting"  # image, create, attach, start
    RUNNING = "running"  # the container runs: its output is read, spooled and shipped
    STOPPING = "stopping"  # a stop was asked (cancel, timeout, disk limit): SIGTERM, the grace, SIGKILL
    EXITED = "exited"  # the container ended: the rest of its output is shipped, then the end is reported
    ENDED = "ended"  # the `ended` report was sent (or refused), the container removed, the files forgotten
    DISCARDED = "discarded"  # no longer current (fenced): the container stopped and removed, nothing reported
    LEFT = "left"  # the agent is closing: the container and the spool stay for the next start to adopt
    FAILED = "failed"  # the executor itself failed (logged): the server's liveness decides what became of it


TERMINAL = frozenset({Phase.ENDED, Phase.DISCARDED, Phase.LEFT, Phase.FAILED})
# Every live phase may go to LEFT (agent closing) and FAILED (a bug, logged); the rest is this table.
_MOVES: dict[Phase, frozenset[Phase]] = {
    # fresh: start it; adopted: follow it (running or already exited), or end it (gone, never started)
    Phase.CREATED: frozenset({Phase.STARTING, Phase.RUNNING, Phase.EXITED, Phase.ENDED}),
    # started; or ended before running (stopped first, refused, the image or the start failed)
    Phase.STARTING: frozenset({Phase.RUNNING, Phase.ENDED}),
    Phase.RUNNING: frozenset({Phase.STOPPING, Phase.EXITED, Phase.DISCARDED}),
    Phase.STOPPING: frozenset({Phase.EXITED, Phase.DISCARDED}),
    # an adopted, already exited container may still owe its `running` report, which can find it fenced
    Phase.EXITED: frozenset({Phase.ENDED, Phase.DISCARDED}),
}
MOVES: dict[Phase, frozenset[Phase]] = {
    phase: (_MOVES.get(phase, frozenset()) | {Phase.LEFT, Phase.FAILED}) if phase not in TERMINAL else frozenset()
    for phase in Phase
}

# What the heartbeat says of the attempt (protocol.RunningAttempt.state). A terminal phase says nothing new:
# it keeps what the phase before it said (the run leaves the executor's list right after).
WIRE_STATE: dict[Phase, str] = {
    Phase.CREATED: "starting",
    Phase.STARTING: "starting",
    Phase.RUNNING: "running",
    Phase.STOPPING: "running",
    Phase.EXITED: "exited",
}


class InvalidPhase(Exception):
    """A move the table does not allow: a bug in the owner thread, never a job's fault."""


def allowed(current: Phase, to: Phase) -> bool:
    return to in MOVES[current]


def advance(current: Phase, to: Phase) -> Phase:
    """The next phase, or InvalidPhase when the table does not allow the move."""
    if not allowed(current, to):
        raise InvalidPhase(f"an attempt cannot go from {current.value} to {to.value}")
    return to


def wire_state(phase: Phase, before: str = "starting") -> str:
    """The heartbeat's state for `phase`; `before`: what the last live phase said (for a terminal one)."""
    return WIRE_STATE.get(phase, before)
