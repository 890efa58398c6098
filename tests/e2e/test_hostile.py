"""Hostile jobs end to end: output bursts, binary output and a 30 MB line; containers removed from outside; cancel.

Each test asserts what the job got (stored bytes, end state, exit code), never how long it took.
"""

from __future__ import annotations

import docker
import pytest

from jobs.node_api.logs import TRUNCATION_MARKER
from tests.e2e.harness import REPO, Platform
from tests.e2e.test_jobs import FAST, Euler

# django_db (rolled back per test) only so that pytest-django sets up the test database: the module's rows are
# written by the module fixture, outside any test's transaction, and flushed when the module ends.
pytestmark = [pytest.mark.e2e, pytest.mark.docker, pytest.mark.django_db]

CAP = 2 * 1024 * 1024  # a small EULER_MAX_LOG_BYTES keeps the 30 MB line fast
BURST_LINES = 250_000  # ~1.6 MB written as fast as the container can: below the cap
BINARY = bytes(range(256))
BINARY_REPEAT = 200


@pytest.fixture(scope="module")
def euler(request, django_db_setup, django_db_blocker, docker_engine, tmp_path_factory):
    """One platform and one node for the module: each test waits for its own jobs to end (and their containers
    to go where it checks that), so the next finds the node idle. Rows are written outside any test's transaction
    and flushed when the module ends, as transactional_db does after a test."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from quotas.services import project_create

    failed_before = request.session.testsfailed
    with django_db_blocker.unblock():
        platform = Platform(
            tmp_path_factory.mktemp("hostile"), env=FAST | {"EULER_MAX_LOG_BYTES": str(CAP)}, topology="compact"
        )
        e = None
        try:
            platform.start()
            owner = get_user_model().objects.create_user(username="hostile-owner", password="pw-for-tests")
            e = Euler(platform, project_create(name="hostile", owner=owner))
            e.node()
            # The tests speak HTTP only: this process goes back to its own Redis, so that the per-test liveness
            # reset (tests/conftest.py) never empties the platform's.
            platform._restore_redis()
            yield e
        finally:
            if request.session.testsfailed > failed_before:
                dest = REPO / "var" / "test-artifacts" / "tests_e2e_test_hostile.py" / "platform0"
                platform.collect(dest)
                print(f"\nprocess logs kept in {dest}\n{platform.tails()}")
            if e is not None:
                e.cleanup()
            platform.stop()
            call_command("flush", verbosity=0, interactive=False)


def stored_as(raw: bytes) -> str:
    """The documented replacement rule: invalid UTF-8 and NUL become U+FFFD, everything else is kept."""
    return raw.decode("utf-8", errors="replace").replace("\x00", "\ufffd")


def test_a_burst_and_a_binary_job_are_stored_byte_exact_and_a_30_mb_line_is_cut_at_exactly_the_cap(euler):
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


def test_a_container_removed_from_outside_mid_run_ends_its_attempt_lost_and_the_retry_succeeds(euler):
    job = euler.submit(["sh", "-c", "sleep 3; echo finished"], max_retries=1, retry_on=["lost"])
    running = euler.wait_state(job["id"], {"running"})
    (container_id,) = euler.containers(running["attempts"][0]["id"])
    docker.from_env().api.remove_container(container_id, force=True)  # docker rm -f by someone else
    done = euler.wait_state(job["id"], {"succeeded", "failed", "lost"}, timeout=90)
    assert done["state"] == "succeeded"
    first, second = done["attempts"]
    assert (first["state"], first["reason"], first["exit_code"]) == ("lost", "lost", None)
    assert "container disappeared" in first["message"]
    assert second["state"] == "succeeded" and euler.logs(job["id"]) == "finished\n"


def test_a_cancelled_sleep_that_does_not_trap_sigterm_ends_by_the_signal_not_by_the_kill_after_the_grace(euler):
    job = euler.submit(["sleep", "120"])  # PID 1 without an init would ignore SIGTERM until the SIGKILL
    running = euler.wait_state(job["id"], {"running"})
    attempt_id = running["attempts"][0]["id"]
    assert euler.http.post(f"jobs/{job['id']}/cancel").status_code in (200, 202)
    euler.platform.wait_for(lambda: euler.job(job["id"])["attempts"][0]["state"] == "cancelled", "the attempt ends")
    attempt = euler.job(job["id"])["attempts"][0]
    assert attempt["exit_code"] == 128 + 15  # SIGTERM through the init; the kill after the grace would be 137
    assert euler.job(job["id"])["state"] == "cancelled"
    euler.platform.wait_for(lambda: not euler.containers(attempt_id), "the container is removed")
