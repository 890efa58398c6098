"""Schedules: the API (create, change, delete, who may), and the tick: exactly once per tick, overlap, catch-up."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from jobs.models import Job
from tests.workflows.conftest import job_body, schedule_body
from workflows import schedules
from workflows.models import Schedule, ScheduleRun

pytestmark = pytest.mark.django_db


def make(api, **over) -> dict:
    r = api.post("/api/v1/schedules", schedule_body(**over), format="json")
    assert r.status_code == 201, r.content
    return r.json()


def due_now(name="nightly") -> datetime:
    """Make the schedule's next tick the last whole minute and return an instant just after it."""
    tick = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=1)
    Schedule.objects.filter(name=name).update(next_tick_at=tick)
    return tick + timedelta(seconds=2)


def test_a_member_creates_a_schedule_and_it_shows_its_next_tick(member_api):
    body = make(member_api, timezone="Asia/Shanghai", job=job_body(env={"TOKEN": "s3cret"}))
    assert body["name"] == "nightly" and body["enabled"] and body["overlap"] == "skip"
    assert body["has_env"] and "env" not in body["job"] and "s3cret" not in str(body)
    assert body["next_tick_at"] is not None and body["created_by"] == "mia"
    assert member_api.get("/api/v1/schedules").json()["results"][0]["name"] == "nightly"


@pytest.mark.parametrize(
    "over, code",
    [
        ({"cron": "61 * * * *"}, "invalid_cron"),
        ({"timezone": "Mars/Base"}, "invalid_timezone"),
        ({"job": job_body(image="")}, "invalid_image"),
        ({"job": job_body(privileged=True)}, "forbidden_option"),
        ({"overlap": "sometimes"}, "invalid_choice"),
        ({"name": "bad name"}, "invalid"),
        ({"extra": 1}, "unknown_field"),
    ],
)
def test_bad_schedules_get_a_400_with_a_code(api, over, code):
    r = api.post("/api/v1/schedules", schedule_body(**over), format="json")
    assert r.status_code == 400 and r.json()["code"] == code, r.content


def test_a_second_schedule_with_the_same_name_conflicts(api):
    make(api)
    r = api.post("/api/v1/schedules", schedule_body(), format="json")
    assert r.status_code == 409 and r.json()["code"] == "name_taken"


def test_disable_and_enable_switch_the_next_tick(api):
    make(api)
    off = api.patch("/api/v1/schedules/nightly", {"enabled": False}, format="json").json()
    assert off["enabled"] is False and off["next_tick_at"] is None
    on = api.patch("/api/v1/schedules/nightly", {"enabled": True, "cron": "0 3 * * *"}, format="json").json()
    assert on["enabled"] and on["next_tick_at"].endswith("03:00:00Z")


def test_members_change_only_their_own_schedules_owners_any(api, member_api):
    make(api, name="owners")
    make(member_api, name="mine")
    r = member_api.delete("/api/v1/schedules/owners")
    assert r.status_code == 403 and r.json()["code"] == "owner_required"
    assert member_api.patch("/api/v1/schedules/mine", {"enabled": False}, format="json").status_code == 200
    assert member_api.delete("/api/v1/schedules/mine").status_code == 204
    assert api.delete("/api/v1/schedules/owners").status_code == 204


def test_another_projects_schedule_answers_404(api, other_api):
    make(api)
    assert other_api.get("/api/v1/schedules/nightly").status_code == 404
    assert other_api.delete("/api/v1/schedules/nightly").status_code == 404


def test_a_due_tick_submits_one_job_and_records_the_run(api):
    make(api, job=job_body(env={"TOKEN": "s3cret"}))
    now = due_now()
    assert schedules.run_due(now=now) == 1
    assert schedules.run_due(now=now) == 0  # the next tick is a minute later
    run = ScheduleRun.objects.get()
    job = Job.objects.get(pk=run.job_id)
    assert run.outcome == "submitted" and job.name == "nightly" and job.has_env
    runs = api.get("/api/v1/schedules/nightly/runs").json()["results"]
    assert [(r["job"], r["outcome"]) for r in runs] == [(job.pk, "submitted")]


def test_a_tick_already_run_by_another_process_submits_nothing(api):
    """The unique (schedule, tick) row, not the row lock: a process with a stale view of next_tick_at loses."""
    make(api)
    now = due_now()
    stale = Schedule.objects.get().next_tick_at
    assert schedules.run_due(now=now) == 1
    Schedule.objects.update(next_tick_at=stale)  # as another process would still see it
    assert schedules.run_due(now=now) == 0
    assert Job.objects.count() == 1 and ScheduleRun.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_two_processes_racing_on_the_same_tick_submit_exactly_one_job(project, api_key, client_for):
    make(client_for(api_key), overlap="allow")
    now = due_now()
    for round_ in range(3):
        barrier = threading.Barrier(4)
        results: list = []

        def tick(barrier=barrier, results=results, at=now + timedelta(minutes=round_)):
            try:
                barrier.wait()
                results.append(schedules.run_due(now=at))
            finally:
                connection.close()

        threads = [threading.Thread(target=tick) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(results) == [0, 0, 0, 1], results
        Schedule.objects.update(next_tick_at=now - timedelta(seconds=2) + timedelta(minutes=round_ + 1))
    assert Job.objects.count() == 3
    assert ScheduleRun.objects.values("tick").distinct().count() == 3


def test_overlap_skip_skips_while_the_previous_job_is_active(api):
    make(api, overlap="skip")
    now = due_now()
    schedules.run_due(now=now)
    Schedule.objects.update(next_tick_at=now - timedelta(seconds=1))
    schedules.run_due(now=now + timedelta(minutes=1))
    runs = list(ScheduleRun.objects.order_by("tick"))
    assert [r.outcome for r in runs] == ["submitted", "skipped"] and Job.objects.count() == 1


def test_overlap_cancel_previous_cancels_the_active_job_first(api):
    make(api, overlap="cancel_previous")
    now = due_now()
    schedules.run_due(now=now)
    first = Job.objects.get()
    Schedule.objects.update(next_tick_at=now - timedelta(seconds=1))
    schedules.run_due(now=now + timedelta(minutes=1))
    first.refresh_from_db()
    assert first.state == "cancelled" and Job.objects.filter(state="queued").count() == 1


def test_overlap_allow_runs_alongside(api):
    make(api, overlap="allow")
    now = due_now()
    schedules.run_due(now=now)
    Schedule.objects.update(next_tick_at=now - timedelta(seconds=1))
    schedules.run_due(now=now + timedelta(minutes=1))
    assert Job.objects.filter(state="queued").count() == 2


def test_after_downtime_one_catch_up_run_for_the_latest_missed_tick(api):
    make(api)
    start = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(hours=3)
    Schedule.objects.update(next_tick_at=start)
    now = start + timedelta(hours=3, seconds=5)
    assert schedules.run_due(now=now) == 1
    assert schedules.run_due(now=now + timedelta(seconds=10)) == 0
    run = ScheduleRun.objects.get()
    assert run.catch_up and run.tick == start + timedelta(hours=3) and "catch-up" in run.message
    assert Schedule.objects.get().next_tick_at == start + timedelta(hours=3, minutes=1)


def test_a_disabled_schedule_never_ticks(api):
    make(api, enabled=False)
    assert schedules.run_due(now=datetime.now(UTC) + timedelta(days=1)) == 0


def test_a_refused_submission_is_recorded_not_raised(api, project):
    make(api)
    project.quota.cpu_core_seconds = 0
    project.quota.save()
    now = due_now()
    schedules.run_due(now=now)
    run = ScheduleRun.objects.get()
    assert run.outcome == "refused" and run.message.startswith("quota_exceeded") and run.job_id is None
    assert Schedule.objects.get().next_tick_at > now  # and it goes on ticking
