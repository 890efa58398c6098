"""The agent's engine probe tells a slow engine (asked again) from an absent one (decided at once)."""

from __future__ import annotations

import logging
import socket

from nodeagent import probe


def test_an_engine_that_does_not_answer_in_time_is_asked_again_before_the_agent_gives_up(tmp_path, monkeypatch, caplog):
    path = tmp_path / "slow.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(8)  # accepted by the kernel, never answered: a busy engine's socket
    monkeypatch.setenv("DOCKER_HOST", f"unix://{path}")
    try:
        with caplog.at_level(logging.WARNING, logger="euler.nodeagent.probe"):
            assert probe.docker_facts(timeout=0.2, patience=1.5) == (None, None)
    finally:
        server.close()
    assert any("asking again" in r.getMessage() for r in caplog.records)


def test_no_engine_at_all_is_decided_at_once(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'absent.sock'}")
    with caplog.at_level(logging.WARNING, logger="euler.nodeagent.probe"):
        assert probe.docker_facts(timeout=0.2, patience=30) == (None, None)
    assert not any("asking again" in r.getMessage() for r in caplog.records)


def test_the_engine_here_answers_with_its_version(docker_engine):
    version, _root = probe.docker_facts()
    assert version
