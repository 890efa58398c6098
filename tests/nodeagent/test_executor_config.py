"""The executor's own settings come from the environment through a strict reader."""

from __future__ import annotations

import pytest

from nodeagent.executor import env_number


def test_it_uses_the_default_when_unset_or_blank(monkeypatch):
    monkeypatch.delenv("EULER_AGENT_STOP_GRACE", raising=False)
    assert env_number("EULER_AGENT_STOP_GRACE", 10, 0, 3600) == 10
    monkeypatch.setenv("EULER_AGENT_STOP_GRACE", " ")
    assert env_number("EULER_AGENT_STOP_GRACE", 10, 0, 3600) == 10


def test_it_reads_a_number_in_range(monkeypatch):
    monkeypatch.setenv("EULER_AGENT_LOG_FLUSH_SECONDS", "0.1")
    assert env_number("EULER_AGENT_LOG_FLUSH_SECONDS", 0.2, 0.01, 10) == 0.1


@pytest.mark.parametrize("raw", ["soon", "-1", "1e9"])
def test_a_bad_value_names_the_variable(monkeypatch, raw):
    monkeypatch.setenv("EULER_AGENT_STOP_GRACE", raw)
    with pytest.raises(ValueError, match="EULER_AGENT_STOP_GRACE"):
        env_number("EULER_AGENT_STOP_GRACE", 10, 0, 3600)
