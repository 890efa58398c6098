"""Preemption end to end: web, worker, beat and a real agent on a full node. A higher-class job preempts the running
lower-class job of another project; the victim is stopped through the agent's stop path, goes back to the queue
with its retry budget untouched and an event naming its preemptor, and finishes once the higher-class job has run."""

from __future__ import annotations

import pytest

from tests.e2e.test_jobs import FAST, TRAP, Euler

pytestmark = [pytest.mark.e2e, pytest.mark.docker]

PREEMPT = {**FAST, "EULER_PREEMPT_MIN_RUN_SECONDS": "1", "EULER_PREEMPT_MAX_PER_HOUR": "3"}
NODE = {"EULER_NODE_MAX_CPU_MILLI": "1000"}  # one 1000m job fills it
# Counts to 8, a second a step; SIGTERM ends it at once (its stop file says why).
COUNTER = ["sh", "-c", TRAP + "i=0; while [ $i -lt 8 ]; do i=$((i+1)); echo step $i; sleep 1; done"]


def two_classes(platform_factory, project, other_project) -> tuple[Euler, Euler]:
    """A platform where `project` may submit class `urgent` (100) and `other_project` only the default: (high, low)."""
    from quotas.models import PriorityClass

    project.max_priority_class = PriorityClass.objects.create(name="urgent", value=100)
    project.save()
    platform = platform_factory(env=PREEMPT)
    return Euler(platform, project), Euler(platform, other_project)


def test_a_higher_class_job_preempts_a_running_lower_class_job_on_a_full_node(
    platform_factory, project, other_project, docker_engine
):
    high, low = two_classes(platform_factory, project, other_project)
    platform = high.platform
    try:
        node = high.node(env=NODE)
        victim = low.submit(COUNTER, cpu_milli=1000, max_retries=0, stop_grace_seconds=5)["id"]
        first = low.wait_state(victim, {"running"})["attempts"][0]
        urgent_job = high.submit(["sh", "-c", "echo urgent done"], cpu_milli=1000, priority_class="urgent")
        assert (urgent_job["priority_class"], urgent_job["priority_value"]) == ("urgent", 100)

        # The victim is stopped and requeued: its attempt ended `preempted`, no retry spent, the preemptor named.
        requeued = platform.wait_for(
            lambda: (j := low.job(victim))["attempts"][0]["state"] == "preempted" and j, "the victim is preempted"
        )
        assert requeued["retries_used"] == 0
        assert any(f"job {urgent_job['id']}" in e["message"] for e in requeued["events"]), requeued["events"]
        assert any(e["reason"] == "preempted" and e["to_state"] == "queued" for e in requeued["events"])

        # The higher-class job runs on the freed node, then the victim runs again and finishes.
        done = high.wait_state(urgent_job["id"], {"succeeded", "failed"}, timeout=90)
        assert done["state"] == "succeeded" and done["attempts"][0]["node"] == node
        finished = low.wait_state(victim, {"succeeded", "failed"}, timeout=120)
        assert finished["state"] == "succeeded", finished
        assert [a["state"] for a in finished["attempts"]] == ["preempted", "succeeded"]
        assert finished["retries_used"] == 0 and finished["attempts"][0]["id"] == first["id"]
        assert "step 8" in low.logs(victim)
        # The urgent job was placed after the victim's preemption was asked, on the node the victim left.
        assert done["attempts"][0]["created_at"] > first["created_at"]
    finally:
        high.cleanup()
