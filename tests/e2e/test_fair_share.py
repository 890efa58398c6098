"""Fair share end to end: web, worker, beat and a real agent. A's backlog fills a scarce node; B's job, submitted
later, gets the first capacity that frees up instead of waiting for A's whole backlog."""

from __future__ import annotations

import pytest

from tests.e2e.test_jobs import FAST, TRAP, Euler

pytestmark = [pytest.mark.e2e, pytest.mark.docker]

LONG = ["sh", "-c", TRAP + "sleep 300 & wait"]  # runs until cancelled; stops at once when told


def test_a_later_projects_job_starts_on_the_first_capacity_freed(
    platform_factory, project, other_project, docker_engine
):
    from nodes.models import Node

    platform = platform_factory(env=FAST)
    a, b = Euler(platform, project), Euler(platform, other_project)
    try:
        name = a.node()
        slots = Node.objects.get(name=name).cpu_milli // 500  # half-core jobs: two per core of this machine
        running = [a.submit(LONG, cpu_milli=500)["id"] for _ in range(slots)]
        backlog = [a.submit(["true"], cpu_milli=500)["id"] for _ in range(3)]
        for job_id in running:
            a.wait_state(job_id, {"running"})
        theirs = b.submit(["true"], cpu_milli=500)["id"]
        fair = "waiting for its fair share (project holds 100% of eligible capacity, weight 1)"
        platform.wait_for(lambda: a.job(backlog[0])["pending_reason"] == fair, "A's backlog waits for its share")
        assert b.job(theirs)["state"] == "queued"

        assert a.http.post(f"jobs/{running[0]}/cancel").status_code == 200  # the first capacity freed
        done = b.wait_state(theirs, {"succeeded", "failed"}, timeout=90)
        assert done["state"] == "succeeded"
        for job_id in running[1:]:
            assert a.http.post(f"jobs/{job_id}/cancel").status_code == 200
        for job_id in backlog:
            assert a.wait_state(job_id, {"succeeded", "failed"}, timeout=90)["state"] == "succeeded"
        # Attempts are numbered in placement order: B's came before any of the jobs A had queued before it.
        assert done["attempts"][0]["id"] < min(a.job(job_id)["attempts"][0]["id"] for job_id in backlog)
    finally:
        a.cleanup()
        b.cleanup()
