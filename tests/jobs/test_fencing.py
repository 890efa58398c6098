"""What a node may do to an attempt (jobs.fencing): the pure decision, and that every node route applies it."""

from __future__ import annotations

import pytest

from jobs import fencing
from jobs.fencing import Right, refusal
from jobs.states import ATTEMPT_ACTIVE, ATTEMPT_ENDED


@pytest.mark.parametrize("right", list(Right))
@pytest.mark.parametrize("state", sorted(ATTEMPT_ACTIVE))
def test_an_active_current_attempt_on_its_node_allows_everything(right, state):
    assert refusal(right=right, state=state, on_node=True, current=True) is None


@pytest.mark.parametrize("right", [Right.REPORT, Right.OUTPUTS, Right.INPUTS])
@pytest.mark.parametrize("state", sorted(ATTEMPT_ENDED))
def test_reports_outputs_and_inputs_end_with_the_attempt(right, state):
    why = refusal(right=right, state=state, on_node=True, current=True)
    assert why and f"has ended ({state})" in why


@pytest.mark.parametrize("state", sorted(ATTEMPT_ENDED))
def test_the_log_replay_of_an_ended_attempt_is_still_taken(state):
    assert refusal(right=Right.LOGS, state=state, on_node=True, current=True) is None


@pytest.mark.parametrize("right", list(Right))
def test_another_node_or_an_attempt_no_longer_current_gets_nothing_and_learns_nothing(right):
    for on_node, current in ((False, True), (True, False), (False, False)):
        why = refusal(right=right, state="running", on_node=on_node, current=current)
        assert why == fencing.StaleAttempt.message  # not the state: the attempt is not this node's business


def test_every_node_route_for_an_attempt_goes_through_the_fence():
    """The node routes under attempts/<id>/ are the report, logs and outputs views; each calls jobs.fencing (directly
    or through the outputs services), none loads an attempt for a node by itself."""
    import inspect

    from jobs import attempts
    from jobs.node_api import logs
    from jobs.outputs import selectors, services

    sources = {m.__name__: inspect.getsource(m) for m in (attempts, logs, services, selectors)}
    assert "fencing.attempt_for(" in sources["jobs.attempts"]
    assert "fencing.attempt_for(" in sources["jobs.node_api.logs"]
    assert sources["jobs.outputs.services"].count("= _outputs_of(node") == 4  # manifest, offset, chunk, done
    assert "fencing.attempt_for(" in sources["jobs.outputs.selectors"]  # input download
    assert all("current_attempt(node" not in text for text in sources.values())
