"""Hostile jobs end to end: output bursts, binary output and a 30 MB line; containers removed from outside; cancel.

Each test asserts what the job got (stored bytes, end state, exit code), never how long it took.
"""

from __future__ import annotations

import docker
import pytest

from jobs.node_api.logs import TRUNCATION_MARKER
from tests.e2e.test_jobs import FAST, Euler

pytestmark = [pytest.mark.e2e, pytest.mark.docker]

CAP = 2 * 1024 * 1024  # a small EULER_MAX_LOG_BYTES keeps the 30 MB line fast
BURST_LINES = 250_000  # ~1.6 MB written as fast as the container can: below the cap
BINARY = bytes(range(256))
BINARY_REPEAT = 200


@pytest.fixture
def euler(platform_factory, project, docker_engine):
    e = Euler(platform_factory(env=FAST | {"EULER_MAX_LOG_BYTES": str(CAP)}), project)
    yield e
    e.cleanup()


def stored_as(raw: bytes) -> str:
    """The documented replacement rule: invalid UTF-8 and NUL become U+FFFD, everything else is kept."""
    return raw.decode("utf-8", errors="replace").replace("\x00", "\ufffd")


def test_a_burst_and_a_binary_job_are_stored_byte_exact_and_a_30_mb_line_is_cut_at_exactly_the_cap(euler):
    euler.node()
    octal = "".join(f"\\{b:03o}" for b in BINARY)
    binary_script = f"i=0; while [ $i -lt {BINARY_REPEAT} ]; do printf '{octal}'; i=$((i+1)); done"
    burst = euler.submit(["seq", "1", str(BURST_LINES)])
    binary = euler.submit(["sh", "-c", binary_script])
    line = euler.submit(["sh", "-c", "head -c 30000000 /dev/zero | tr '\\0' x"], memory_bytes=128 << 20)
    expected_burst = "".join(f"{i}\n" for i in range(1, BURST_LINES + 1))
    assert len(expected_burst.encode()) < CAP
    for job in (burst, binary, line):
        done = euler.wait_state(job["id"], {"succeeded", "failed", "lost"}, timeout=120)
        assert (done["state"], done["exit_code"]) == ("succeeded", 0), done
    assert euler.logs(burst["id"]) == expected_burst
    assert euler.logs(binary["id"]) == stored_as(BINARY * BINARY_REPEAT)
    text = euler.logs(line["id"])
    assert text == "x" * CAP + TRUNCATION_MARKER.format(limit=CAP)
    attempts = {j["id"]: euler.job(j["id"])["attempts"][0] for j in (burst, binary, line)}
    assert [attempts[j["id"]]["log_truncated"] for j in (burst, binary, line)] == [False, False, True]
    assert attempts[line["id"]]["log_bytes"] == CAP
