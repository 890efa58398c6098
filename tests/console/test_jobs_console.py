import pytest

from jobs.models import Job

pytestmark = pytest.mark.django_db

FORM = {
    "name": "hello",
    "image": "euler-test/busybox",
    "command": "sh -c 'echo hello from the console'",
    "cpu_cores": "0.5",
    "memory_mib": "64",
    "gpu_count": "0",
    "timeout_seconds": "60",
    "max_retries": "1",
    "retry_on": ["lost", "failed"],
    "env": "GREETING=hi\nEMPTY=",
    "node_selector": "",
}


def test_the_form_submits_a_job_in_api_units(signed_in, project):
    response = signed_in.post("/jobs/new/", FORM)
    job = Job.objects.get(project=project)
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.pk}/"
    assert job.command == ["sh", "-c", "echo hello from the console"]
    assert job.cpu_milli == 500 and job.memory_bytes == 64 * 1024 * 1024
    assert job.retry_on == ["lost", "failed"] and job.has_env


def test_the_form_shows_the_apis_messages_next_to_each_field(signed_in, project):
    bad = {**FORM, "image": "Not An Image!", "cpu_cores": "0", "timeout_seconds": "soon", "env": "no equals sign"}
    response = signed_in.post("/jobs/new/", bad)
    assert response.status_code == 400
    body = response.content.decode()
    assert "image is not a valid image reference" in body.split('id="err-image"')[1].split("</p>")[0]
    assert "cpu_milli must be between" in body.split('id="err-cpu_milli"')[1].split("</p>")[0]
    assert "must be an integer" in body.split('id="err-timeout_seconds"')[1].split("</p>")[0]
    assert "KEY=VALUE" in body.split('id="err-env"')[1].split("</p>")[0]
    assert 'value="Not An Image!"' in body
    assert not Job.objects.exists()


def test_the_detail_shows_the_pending_reason_and_cancel_uses_the_service(signed_in, project):
    signed_in.post("/jobs/new/", FORM)
    job = Job.objects.get(project=project)
    Job.objects.filter(pk=job.pk).update(pending_reason="3 nodes lack 2 free GPUs")
    body = signed_in.get(f"/jobs/{job.pk}/").content.decode()
    assert "3 nodes lack 2 free GPUs" in body and f'data-ws="/ws/jobs/{job.pk}/logs/"' in body
    assert "GREETING" not in body and "hi\n" not in body
    signed_in.post(f"/jobs/{job.pk}/cancel/")
    job.refresh_from_db()
    assert job.state == "cancelled"
    assert job.events.filter(to_state="cancelled").exists()
    signed_in.post(f"/jobs/{job.pk}/retry/")
    job.refresh_from_db()
    assert job.state == "queued"


def test_the_list_filters_by_state_and_name(signed_in, project):
    signed_in.post("/jobs/new/", FORM)
    signed_in.post("/jobs/new/", {**FORM, "name": "other"})
    Job.objects.filter(name="other").update(state="failed")
    body = signed_in.get("/jobs/?state=queued").content.decode()
    assert ">hello</a>" in body and ">other</a>" not in body
    body = signed_in.get("/jobs/?q=oth").content.decode()
    assert ">other</a>" in body and ">hello</a>" not in body
    assert signed_in.get("/jobs/?state=bogus").status_code == 200


def test_another_projects_job_is_404(signed_in, other_project):
    from jobs.api.serializers import JobCreateSerializer
    from jobs.services import job_submit

    body = JobCreateSerializer(
        data={
            "name": "x",
            "image": "alpine:3.20",
            "command": ["true"],
            "cpu_milli": 1,
            "memory_bytes": 8 << 20,
            "timeout_seconds": 5,
        }
    )
    body.is_valid(raise_exception=True)
    theirs = job_submit(project=other_project, spec=dict(body.validated_data))
    assert signed_in.get(f"/jobs/{theirs.pk}/").status_code == 404
    assert signed_in.post(f"/jobs/{theirs.pk}/cancel/").status_code == 404
    theirs.refresh_from_db()
    assert theirs.state == "queued"


def test_the_list_says_when_it_shows_only_the_newest(signed_in, project, monkeypatch):
    monkeypatch.setattr("console.views.jobs.PAGE", 1)
    signed_in.post("/jobs/new/", FORM)
    signed_in.post("/jobs/new/", {**FORM, "name": "newer"})
    body = signed_in.get("/jobs/").content.decode()
    assert ">newer</a>" in body and ">hello</a>" not in body
    assert "The newest 1 of 2 jobs" in body
