"""The node simulator (bench/nodes_sim.py) in small: 100 simulated agents enroll, beat and run 200 jobs."""

from __future__ import annotations

import sys

import pytest

from tests.e2e.harness import REPO

pytestmark = pytest.mark.e2e

FAST = {"EULER_NODE_HEARTBEAT_MIN_INTERVAL": "2", "EULER_SCHEDULER_INTERVAL": "1", "EULER_NODE_SEEN_FLUSH_EVERY": "1"}


def test_a_hundred_simulated_nodes_run_two_hundred_jobs_each_exactly_once_and_none_goes_offline(platform_factory):
    sys.path.insert(0, str(REPO))
    from bench.nodes_sim import report, simulate

    platform = platform_factory(env=FAST)
    lines: list[str] = []
    result = simulate(platform.url, nodes=100, jobs=200, hold=3, run_time=0.05, log_chunks=2, connections=16,
                      web_pid=platform.procs["web"].pid, settle=2, jobs_timeout=180, out=lines.append)  # fmt: skip
    report(result, out=lines.append)
    print("\n".join(lines))
    assert result["states"] == {"succeeded": 200}
    assert result["jobs_with_several_attempts"] == 0 and result["runs_not_once"] == 0
    assert result["false_offline"] == 0
    assert result["heartbeats"] > 0 and not result["heartbeat_errors"]
