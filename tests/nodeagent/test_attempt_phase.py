"""The phases of an attempt on a host and the moves between them (pure table)."""

from __future__ import annotations

import pytest

from nodeagent.attempt_phase import MOVES, TERMINAL, InvalidPhase, Phase, advance, allowed, wire_state

P = Phase
ALLOWED = [
    (P.CREATED, P.STARTING),  # a fresh assignment
    (P.CREATED, P.RUNNING),  # adopted, still running
    (P.CREATED, P.EXITED),  # adopted, exited while no agent ran
    (P.CREATED, P.ENDED),  # adopted, but gone or never started: lost
    (P.STARTING, P.RUNNING),
    (P.STARTING, P.ENDED),  # stopped first, refused, the image or the start failed
    (P.RUNNING, P.STOPPING),
    (P.RUNNING, P.EXITED),
    (P.RUNNING, P.DISCARDED),
    (P.STOPPING, P.EXITED),
    (P.STOPPING, P.DISCARDED),
    (P.EXITED, P.ENDED),
    (P.EXITED, P.DISCARDED),
]
REFUSED = [
    (P.CREATED, P.STOPPING),
    (P.CREATED, P.DISCARDED),
    (P.STARTING, P.STOPPING),
    (P.STARTING, P.EXITED),
    (P.STARTING, P.DISCARDED),
    (P.RUNNING, P.STARTING),
    (P.RUNNING, P.ENDED),  # the end is reported only once the output is shipped (EXITED)
    (P.STOPPING, P.RUNNING),
    (P.STOPPING, P.ENDED),
    (P.EXITED, P.RUNNING),
    (P.EXITED, P.STOPPING),
    (P.RUNNING, P.RUNNING),
    (P.ENDED, P.LEFT),
    (P.LEFT, P.RUNNING),
    (P.DISCARDED, P.ENDED),
    (P.FAILED, P.FAILED),
]


@pytest.mark.parametrize(("current", "to"), ALLOWED)
def test_it_allows_the_moves_of_an_attempts_life(current, to):
    assert allowed(current, to) and advance(current, to) is to


@pytest.mark.parametrize(("current", "to"), REFUSED)
def test_it_refuses_a_move_the_table_does_not_list(current, to):
    assert not allowed(current, to)
    with pytest.raises(InvalidPhase, match=f"from {current.value} to {to.value}"):
        advance(current, to)


def test_every_live_phase_can_be_left_to_the_next_agent_or_fail_and_no_terminal_phase_moves():
    for phase in Phase:
        if phase in TERMINAL:
            assert MOVES[phase] == frozenset()
        else:
            assert {P.LEFT, P.FAILED} <= MOVES[phase]


def test_the_table_lists_exactly_the_moves_above():
    listed = {(a, b) for a, b in ALLOWED} | {(p, t) for p in Phase if p not in TERMINAL for t in (P.LEFT, P.FAILED)}
    assert {(a, b) for a, tos in MOVES.items() for b in tos} == listed


def test_the_heartbeat_says_starting_running_or_exited_and_a_terminal_phase_keeps_the_last():
    assert [wire_state(p) for p in (P.CREATED, P.STARTING, P.RUNNING, P.STOPPING, P.EXITED)] == [
        "starting",
        "starting",
        "running",
        "running",
        "exited",
    ]
    assert wire_state(P.DISCARDED, "running") == "running"
    assert wire_state(P.LEFT, "exited") == "exited"
