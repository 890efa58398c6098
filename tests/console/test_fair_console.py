"""The console's job page shows priority, the project's weight and share, and the fair-share pending reasons."""

import pytest

from jobs.models import Job
from quotas.models import Project
from tests.console.test_jobs_console import FORM

pytestmark = pytest.mark.django_db


def test_the_form_takes_a_priority_and_the_detail_shows_it_with_the_share(signed_in, project):
    Project.objects.filter(pk=project.pk).update(weight=2)
    signed_in.post("/jobs/new/", {**FORM, "priority": "40"})
    job = Job.objects.get(project=project)
    assert job.priority == 40
    reason = "waiting for its fair share (project holds 62% of eligible capacity, weight 2)"
    Job.objects.filter(pk=job.pk).update(pending_reason=reason)
    body = signed_in.get(f"/jobs/{job.pk}/").content.decode()
    assert reason in body
    assert "40" in body.split('id="job-priority"')[1].split("</dd>")[0]
    share = body.split('id="fair-share"')[1].split("</dd>")[0]
    assert "project weight 2" in share and "holds 0.0% of the capacity it may use" in share


def test_a_priority_out_of_range_is_shown_next_to_the_field(signed_in, project):
    response = signed_in.post("/jobs/new/", {**FORM, "priority": "500"})
    assert response.status_code == 400
    assert "priority must be between" in response.content.decode().split('id="err-priority"')[1].split("</p>")[0]
    assert not Job.objects.exists()
