"""The console's schedules and webhooks pages: list, switch, delete; register (secret once), log, redeliver."""

from __future__ import annotations

import pytest

from jobs import services as job_services
from tests.workflows.conftest import job_body
from tests.workflows.receiver import Receiver
from workflows import schedules, tasks
from workflows.models import Schedule, Webhook

pytestmark = pytest.mark.django_db


@pytest.fixture
def nightly(project, owner):
    spec = job_body()
    return schedules.schedule_create(
        project=project, fields={"name": "nightly", "cron": "0 2 * * *", "timezone": "UTC"}, spec=spec, by=owner
    )


@pytest.mark.parametrize("url", ["/schedules/", "/webhooks/"])
def test_the_pages_render_for_the_owner_and_send_anonymous_visitors_to_login(signed_in, browser_client, url):
    assert signed_in.get(url).status_code == 200
    signed_in.logout()
    assert browser_client.get(url)["Location"].startswith("/login/")


def test_schedules_list_switch_runs_and_delete(signed_in, nightly):
    page = signed_in.get("/schedules/").content.decode()
    assert "nightly" in page and "0 2 * * *" in page
    signed_in.post("/schedules/nightly/switch/", {"enabled": "0"})
    assert not Schedule.objects.get().enabled
    signed_in.post("/schedules/nightly/switch/", {"enabled": "1"})
    assert Schedule.objects.get().enabled
    assert "No runs yet" in signed_in.get("/schedules/nightly/").content.decode()
    signed_in.post("/schedules/nightly/delete/")
    assert not Schedule.objects.exists()


def test_a_member_cannot_see_webhooks_or_change_others_schedules(browser_client, project, make_user, nightly):
    from quotas.models import Membership

    mia = make_user("mia")
    Membership.objects.create(project=project, user=mia, role="member")
    browser_client.force_login(mia)
    assert browser_client.get("/webhooks/").status_code == 403
    assert browser_client.post("/schedules/nightly/delete/").status_code == 403
    assert Schedule.objects.exists()


def test_register_a_webhook_see_its_log_and_redeliver(signed_in, settings, django_capture_on_commit_callbacks):
    settings.EULER_WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    refused = signed_in.post("/webhooks/", {"url": "http://10.0.0.1/", "events": ["job.ended"]}).content.decode()
    assert "refused" in refused and not Webhook.objects.exists()
    with Receiver() as receiver:
        page = signed_in.post("/webhooks/", {"url": receiver.url, "events": ["job.state_changed"]}).content.decode()
        hook = Webhook.objects.get()
        assert hook.secret in page  # this once
        assert hook.secret not in signed_in.get("/webhooks/").content.decode()
        job_services.job_submit(project=hook.project, spec=job_body())
        tasks.webhook_dispatch()
        log = signed_in.get(f"/webhooks/{hook.pk}/").content.decode()
        assert "job.queued" in log and "HTTP 200" in log
        delivery = hook.deliveries.get()
        with django_capture_on_commit_callbacks(execute=True):
            signed_in.post(f"/webhooks/{hook.pk}/deliveries/{delivery.pk}/redeliver/")
    assert hook.deliveries.count() == 2 and len(receiver.requests) == 2
    signed_in.post(f"/webhooks/{hook.pk}/delete/")
    assert not Webhook.objects.exists()


def test_the_pages_speak_chinese(signed_in):
    signed_in.post("/i18n/setlang/", {"language": "zh-hans", "next": "/"})
    assert "定时任务" in signed_in.get("/schedules/").content.decode()
    assert "注册 Webhook" in signed_in.get("/webhooks/").content.decode()


def test_a_jobs_page_shows_its_exit_code_retry_policy(signed_in, project):
    job = job_services.job_submit(
        project=project, spec=job_body(retry_on=["lost", {"exit_codes": [75, "128-143"]}], max_retries=2)
    )
    assert "lost, exit codes 75, 128-143" in signed_in.get(f"/jobs/{job.pk}/").content.decode()


def test_the_job_form_takes_exit_codes_to_retry_on(signed_in, project):
    from jobs.models import Job
    from tests.console.test_jobs_console import FORM

    response = signed_in.post("/jobs/new/", {**FORM, "retry_exit_codes": "75, 128-143"})
    assert response.status_code == 302
    assert Job.objects.get(project=project).retry_on == ["lost", "failed", {"exit_codes": [75, "128-143"]}]
    bad = signed_in.post("/jobs/new/", {**FORM, "retry_exit_codes": "300"})
    assert bad.status_code == 400 and "exit codes lie between 0 and 255" in bad.content.decode()
