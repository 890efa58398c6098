"""Workflows end to end: a real agent's exit code drives the retry policy; two beats tick a schedule once per tick.

The two-beat run waits for E2E_SCHEDULE_MINUTES cron ticks of `* * * * *` (default 1: one tick shows that two
beats submit one job, not two); the issue's five-minute run is `E2E_SCHEDULE_MINUTES=5` (figures in BENCHMARKS.md).
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime

import pytest

from tests.e2e.harness import FEATURE_TICKS, PY
from tests.e2e.test_jobs import FAST, Euler

pytestmark = [pytest.mark.e2e]
MINUTES = int(os.environ.get("E2E_SCHEDULE_MINUTES", "1"))


@pytest.mark.docker
def test_a_job_exiting_75_is_retried_by_exit_code_with_the_backoff_in_its_events(platform_factory, project,
                                                                                 docker_engine):  # fmt: skip
    euler = Euler(platform_factory(env=FAST), project)
    try:
        euler.node()
        job = euler.submit(["sh", "-c", "echo try; exit 75"], max_retries=2,
                           retry_on=[{"exit_codes": [75, "128-143"]}],
                           retry_backoff={"initial": 1, "factor": 2, "max": 10})  # fmt: skip
        done = euler.wait_state(job["id"], {"failed", "succeeded"}, timeout=180)
        assert (done["state"], done["exit_code"], done["retries_used"]) == ("failed", 75, 2)
        assert [a["exit_code"] for a in done["attempts"]] == [75, 75, 75]
        retries = [e["message"] for e in done["events"] if e["to_state"] == "queued" and e["from_state"]]
        assert len(retries) == 2 and all("exit code 75 matched 75" in m for m in retries), retries
        assert "retry 1 of 2 in " in retries[0] and "retry 2 of 2 in " in retries[1]
        # not placed before its time: each next attempt starts after the previous one ended plus its delay
        attempts = done["attempts"]
        for (before, after), message in zip(zip(attempts[:-1], attempts[1:], strict=True), retries, strict=True):
            delay = float(message.split(" in ")[1].split("s,")[0])
            ended = datetime.fromisoformat(before["ended_at"].replace("Z", "+00:00"))
            created = datetime.fromisoformat(after["created_at"].replace("Z", "+00:00"))
            assert (created - ended).total_seconds() >= delay - 0.05, (before, after, message)
    finally:
        euler.cleanup()


@pytest.mark.timeout(180 + 60 * MINUTES)
def test_two_beats_submit_one_job_per_tick_of_a_schedule(platform_factory, project):
    from jobs.models import Job
    from workflows.models import ScheduleRun

    minutes = MINUTES
    platform = platform_factory(env=FEATURE_TICKS)
    # the second beat, with its own schedule file: both send every tick task
    platform.spawn("beat2", [PY, "-m", "celery", "-A", "euler", "beat", "-l", "info",
                             "-s", str(platform.tmp / "data" / "celerybeat-schedule-2")])  # fmt: skip
    euler = Euler(platform, project)
    r = euler.http.post("schedules", json={"name": "every-minute", "cron": "* * * * *", "overlap": "allow", "job": {
        "name": "tick", "image": "euler-test/busybox", "command": ["true"], "cpu_milli": 100,
        "memory_bytes": 64 * 1024 * 1024, "timeout_seconds": 60}})  # fmt: skip
    assert r.status_code == 201, r.text
    first = datetime.fromisoformat(r.json()["next_tick_at"].replace("Z", "+00:00"))
    last = first.timestamp() + (minutes - 1) * 60

    def ticks_done() -> int:  # tick tasks the worker finished, from either beat (each sends one a second)
        text = platform.control_log.read_text(errors="replace")
        return sum(
            1 for line in text.splitlines() if "workflows.tasks.schedule_tick[" in line and " succeeded " in line
        )

    platform.wait_for(lambda: ScheduleRun.objects.filter(schedule__name="every-minute").count() >= minutes,
                      f"the schedule's {minutes} tick(s)", timeout=last - time.time() + 60)  # fmt: skip
    # Then both beats' next tick tasks: a second run of the last tick would have been made by now.
    seen = ticks_done()
    platform.wait_for(lambda: ticks_done() >= seen + 6, "six more tick tasks after the last tick's run")
    runs = list(ScheduleRun.objects.filter(schedule__name="every-minute").order_by("tick"))
    ticks = [run.tick for run in runs]
    assert len(ticks) == len(set(ticks)) == minutes, ticks
    assert all(run.outcome == "submitted" and not run.catch_up for run in runs)
    assert [t.astimezone(UTC).second for t in ticks] == [0] * minutes
    assert Job.objects.filter(project=project, name="tick").count() == minutes
    lateness = [(run.created_at - run.tick).total_seconds() for run in runs]
    print(
        f"\ntwo beats, {minutes} ticks of * * * * *: {len(runs)} runs, {len(set(ticks))} distinct ticks, "
        f"jobs {Job.objects.filter(project=project, name='tick').count()}, run lateness s {lateness}"
    )


def test_real_workers_deliver_signed_events_on_the_webhooks_queue(platform_factory, project):
    """Beat sends the dispatch, the background worker consumes the `webhooks` queue, the receiver verifies."""
    import json

    from tests.workflows.receiver import Receiver
    from workflows import signing

    platform = platform_factory(
        env={**FEATURE_TICKS, "EULER_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.0/8", "EULER_WEBHOOK_RETRY_BACKOFF": "1"}
    )
    euler = Euler(platform, project)
    with Receiver(answers=[500]) as receiver:
        r = euler.http.post("webhooks", json={"url": receiver.url, "events": ["job.queued", "job.cancelled"]})
        assert r.status_code == 201, r.text
        secret = r.json()["secret"]
        job = euler.submit(["true"])  # no node: it stays queued until cancelled
        assert euler.http.post(f"jobs/{job['id']}/cancel").status_code == 200
        platform.wait_for(
            lambda: len(receiver.requests) >= 3, "queued and cancelled, one of them twice (500, then 200)", timeout=90
        )
    types = []
    for headers, body in receiver.requests:
        assert signing.verify(secret, headers["euler-signature"], body, now=int(time.time()))
        types.append(json.loads(body)["type"])
    # whichever came first got the 500 and was delivered again
    assert len(types) == 3 and sorted(set(types)) == ["job.cancelled", "job.queued"], types
