"""Fair per project, against the database: schedule limits in the quota (API refusals, setquota), due schedules in
turns, the webhook dispatch's pending cap and batches, a departed member's schedules, runs' retention, and
webhook URLs cut to their origin in the audit trail."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from audit.models import AuditEvent
from tests.workflows.conftest import job_body, schedule_body
from workflows import dispatch, schedules
from workflows.models import Delivery, Schedule, ScheduleRun, Webhook

pytestmark = pytest.mark.django_db


def quota(project, **fields):
    from quotas.models import Quota

    Quota.objects.filter(project=project).update(**fields)


# --- limits ------------------------------------------------------------------------------------------------
def test_a_project_past_its_schedule_count_gets_429_schedule_limit_and_nothing_is_written(api, project):
    quota(project, max_schedules=1)
    assert api.post("/api/v1/schedules", schedule_body(name="one"), format="json").status_code == 201
    r = api.post("/api/v1/schedules", schedule_body(name="two"), format="json")
    assert r.status_code == 429 and r.json()["code"] == "schedule_limit", r.content
    assert "at most 1 schedules" in r.json()["detail"]
    assert list(Schedule.objects.values_list("name", flat=True)) == ["one"]


def test_a_cron_faster_than_the_minimum_period_gets_400(api, project):
    quota(project, schedule_min_period=3600)
    r = api.post("/api/v1/schedules", schedule_body(cron="*/5 * * * *"), format="json")
    assert r.status_code == 400 and r.json()["code"] == "schedule_period_too_short", r.content
    # a burst once a day is as fast as its gap, however rare the burst
    r = api.post("/api/v1/schedules", schedule_body(cron="0-1 9 * * *"), format="json")
    assert r.status_code == 400 and r.json()["code"] == "schedule_period_too_short"
    assert api.post("/api/v1/schedules", schedule_body(cron="0 * * * *"), format="json").status_code == 201
    r = api.patch("/api/v1/schedules/nightly", {"cron": "* * * * *"}, format="json")
    assert r.status_code == 400 and r.json()["code"] == "schedule_period_too_short"
    assert Schedule.objects.get().cron == "0 * * * *"


def test_the_runs_per_minute_of_enabled_schedules_are_bounded(api, project):
    quota(project, schedule_runs_per_minute=1)
    assert api.post("/api/v1/schedules", schedule_body(name="a"), format="json").status_code == 201
    r = api.post("/api/v1/schedules", schedule_body(name="b"), format="json")
    assert r.status_code == 429 and r.json()["code"] == "schedule_rate_limit", r.content
    assert api.post("/api/v1/schedules", schedule_body(name="b", enabled=False), format="json").status_code == 201
    r = api.patch("/api/v1/schedules/b", {"enabled": True}, format="json")
    assert r.status_code == 429 and r.json()["code"] == "schedule_rate_limit"
    assert api.patch("/api/v1/schedules/a", {"enabled": False}, format="json").status_code == 200
    assert api.patch("/api/v1/schedules/b", {"enabled": True}, format="json").status_code == 200


def test_a_schedules_job_with_an_array_is_refused_with_400(api):
    r = api.post("/api/v1/schedules", schedule_body(job=job_body(array={"count": 3})), format="json")
    assert r.status_code == 400 and r.json()["code"] == "schedule_array_unsupported", r.content
    assert not Schedule.objects.exists()
    assert api.post("/api/v1/schedules", schedule_body(), format="json").status_code == 201
    r = api.patch("/api/v1/schedules/nightly", {"job": job_body(array={"count": 3})}, format="json")
    assert r.status_code == 400 and r.json()["code"] == "schedule_array_unsupported"


def test_a_stored_array_spec_is_recorded_as_refused_not_run_as_one_job(api):
    from jobs.models import Job

    api.post("/api/v1/schedules", schedule_body(), format="json")
    Schedule.objects.update(spec={**Schedule.objects.get().spec, "array": {"count": 3}})
    tick = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=1)
    Schedule.objects.update(next_tick_at=tick)
    schedules.run_due(now=tick + timedelta(seconds=2))
    run = ScheduleRun.objects.get()
    assert run.outcome == "refused" and run.message.startswith("schedule_array_unsupported")
    assert not Job.objects.exists()


def test_setquota_sets_the_schedule_limits(project):
    out = io.StringIO()
    call_command("setquota", "alpha", "--schedules", "7", "--schedule-min-period", "300",
                 "--schedule-runs-per-minute", "3", stdout=out)  # fmt: skip
    assert "schedules=7 schedule_min_period=300 schedule_runs_per_minute=3" in out.getvalue()
    project.quota.refresh_from_db()
    assert (project.quota.max_schedules, project.quota.schedule_min_period) == (7, 300)
    assert AuditEvent.objects.filter(action="quota.changed").latest("id").details["max_schedules"] == 7
    with pytest.raises(CommandError, match="at least 60"):
        call_command("setquota", "alpha", "--schedule-min-period", "30", stdout=io.StringIO())


def test_a_new_project_gets_the_free_schedule_limits(project, settings):
    q = project.quota
    assert q.max_schedules == settings.EULER_FREE_QUOTA_SCHEDULES
    assert q.schedule_min_period == settings.EULER_FREE_QUOTA_SCHEDULE_MIN_PERIOD
    assert q.schedule_runs_per_minute == settings.EULER_FREE_QUOTA_SCHEDULE_RUNS_PER_MINUTE


# --- due schedules in turns ---------------------------------------------------------------------------------
def test_due_schedules_are_taken_in_turns_per_project(api, other_api, project):
    quota(project, max_schedules=50, schedule_runs_per_minute=50)
    for i in range(30):
        api.post("/api/v1/schedules", schedule_body(name=f"a{i}"), format="json")
    other_api.post("/api/v1/schedules", schedule_body(name="b"), format="json")
    tick = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=1)
    Schedule.objects.update(next_tick_at=tick)
    Schedule.objects.filter(name="b").update(next_tick_at=tick + timedelta(seconds=1))  # the younger tick
    b = Schedule.objects.get(name="b").pk
    order = schedules.due_round(now=tick + timedelta(seconds=2), quantum=20)
    assert len(order) == 21 and order.index(b) == 1  # one of A's, then B's, then the rest of A's quantum
    assert schedules.run_due(now=tick + timedelta(seconds=2), budget=float("inf")) == 31  # every one, once


# --- a departed member's schedules --------------------------------------------------------------------------
def test_removing_a_member_disables_their_schedules_with_an_audit_entry(api, member_api, project):
    member_api.post("/api/v1/schedules", schedule_body(name="mine"), format="json")
    api.post("/api/v1/schedules", schedule_body(name="owners"), format="json")
    mia = Schedule.objects.get(name="mine").created_by
    assert api.delete(f"/api/v1/project/members/{mia.pk}").status_code == 204
    mine, owners = Schedule.objects.get(name="mine"), Schedule.objects.get(name="owners")
    assert (mine.enabled, mine.next_tick_at) == (False, None) and owners.enabled
    entry = AuditEvent.objects.get(action="schedule.disabled")
    assert entry.target == "schedule:mine" and entry.project_id == project.pk
    assert entry.details == {"reason": "member_removed", "member": "mia"}
    assert schedules.run_due(now=timezone.now() + timedelta(days=1)) == 1  # the owner's only


def test_a_deleted_users_schedules_are_disabled_too(member_api):
    member_api.post("/api/v1/schedules", schedule_body(name="mine"), format="json")
    Schedule.objects.get(name="mine").created_by.delete()
    schedule = Schedule.objects.get(name="mine")
    assert not schedule.enabled and schedule.created_by is None
    assert AuditEvent.objects.filter(action="schedule.disabled", target="schedule:mine").count() == 1


# --- retention ----------------------------------------------------------------------------------------------
def test_old_schedule_runs_leave_with_retention(api, settings):
    from euler import retention

    settings.EULER_SCHEDULE_RUN_RETENTION_DAYS = 7
    api.post("/api/v1/schedules", schedule_body(), format="json")
    schedule = Schedule.objects.get()
    now = timezone.now()
    old = ScheduleRun.objects.create(schedule=schedule, tick=now - timedelta(days=8), outcome="skipped")
    ScheduleRun.objects.filter(pk=old.pk).update(created_at=now - timedelta(days=8))
    new = ScheduleRun.objects.create(schedule=schedule, tick=now, outcome="skipped")
    assert retention.purge_expired(now=now)["schedule_runs"] == 1
    assert list(ScheduleRun.objects.values_list("pk", flat=True)) == [new.pk]
    settings.EULER_SCHEDULE_RUN_RETENTION_DAYS = 0
    ScheduleRun.objects.filter(pk=new.pk).update(created_at=now - timedelta(days=800))
    assert retention.purge_expired(now=now)["schedule_runs"] == 0


# --- webhooks: the pending cap and one batch per project ------------------------------------------------------
def hook(project, url="http://127.0.0.1:9/hook") -> Webhook:
    return Webhook.objects.create(project=project, url=url, events=["job.queued"], secret="whsec_x")


def submit(client, n=1):
    from tests.jobs.conftest import seed_body

    for _ in range(n):
        assert client.post("/api/v1/jobs", seed_body(), format="json").status_code == 201


def test_a_project_at_its_pending_cap_waits_and_others_do_not(api, other_api, project, other_project, settings):
    settings.EULER_WEBHOOK_PENDING_PER_PROJECT = 2
    a, b = hook(project), hook(other_project)
    submit(api, 3)
    submit(other_api, 1)
    dispatch.dispatch()
    assert (a.deliveries.count(), b.deliveries.count()) == (2, 1)
    submit(other_api, 1)
    dispatch.dispatch()
    assert (a.deliveries.count(), b.deliveries.count()) == (2, 2)  # A waits at its cap, B goes on
    a.deliveries.update(state="succeeded")
    dispatch.dispatch()
    assert a.deliveries.count() == 3  # nothing dropped: A's third event once its receiver caught up
    keys = sorted(int(k.split(":")[1]) for k in a.deliveries.values_list("key", flat=True))
    assert keys == sorted(keys) and len(set(keys)) == 3


def test_a_project_gets_one_batch_in_flight_and_another_project_is_not_held(api, other_api, project, other_project):
    a, b = hook(project), hook(other_project)
    submit(api, 5)
    dispatch.dispatch()
    (first,) = dispatch.claim(per_project=2)
    assert len(first) == 2 and {Delivery.objects.get(pk=pk).hook_id for pk, _ in first} == {a.pk}
    submit(other_api, 1)
    dispatch.dispatch()
    (second,) = dispatch.claim(per_project=2)  # A's batch is still in flight: B's alone
    assert [Delivery.objects.get(pk=pk).hook_id for pk, _ in second] == [b.pk]
    Delivery.objects.filter(pk__in=[pk for pk, _ in first]).update(state="succeeded")
    (third,) = dispatch.claim(per_project=2)
    assert len(third) == 2 and all(Delivery.objects.get(pk=pk).hook_id == a.pk for pk, _ in third)


# --- the audit trail keeps a webhook URL's origin only ------------------------------------------------------
def test_webhook_urls_in_the_audit_trail_keep_only_scheme_and_host(api, settings):
    settings.EULER_WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    url = "http://127.0.0.1:9/services/T000/B000/XXXXsecretXXXX?token=abc"
    made = api.post("/api/v1/webhooks", {"url": url, "events": ["job.ended"]}, format="json").json()
    api.delete(f"/api/v1/webhooks/{made['id']}")
    for action in ("webhook.created", "webhook.deleted"):
        assert AuditEvent.objects.get(action=action).details["url"] == "http://127.0.0.1:9/[redacted]"
    dumped = str(list(AuditEvent.objects.values()))
    assert "XXXXsecretXXXX" not in dumped and "token=abc" not in dumped


def test_an_operator_sets_the_schedule_limits_in_the_admin(project, make_user, client):
    client.force_login(make_user("root", staff=True))
    q = project.quota
    form = {"project": project.pk}
    for name in ("cpu_core_seconds", "gpu_seconds", "invocations", "max_concurrent_jobs", "max_api_keys"):
        form[name] = getattr(q, name)
    for name in ("output_bytes", "max_schedules", "schedule_min_period", "schedule_runs_per_minute"):
        form[name] = form[f"initial-{name}"] = getattr(q, name)  # callable defaults: posted with their initial
    form.update(max_schedules=5, schedule_min_period=600)
    response = client.post(f"/admin/quotas/quota/{q.pk}/change/", form)
    assert response.status_code == 302, response.content.decode()[:2000]
    q.refresh_from_db()
    assert (q.max_schedules, q.schedule_min_period) == (5, 600)
    assert AuditEvent.objects.filter(action="quota.changed").latest("id").details == {
        "max_schedules": 5,
        "schedule_min_period": 600,
    }
    form["schedule_min_period"] = 30  # finer than cron's minute: refused by the form
    assert client.post(f"/admin/quotas/quota/{q.pk}/change/", form).status_code == 200
