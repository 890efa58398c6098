"""The console shows an array as one row with a progress bar, its page with tasks, and dependencies as links."""

import pytest

from console.arrays import progress
from jobs import arrays, services
from jobs.models import Job

pytestmark = pytest.mark.django_db

SPEC = {"name": "sweep", "image": "euler-test/busybox", "command": ["true"], "cpu_milli": 100,
        "memory_bytes": 64 << 20, "timeout_seconds": 60}  # fmt: skip


def make_array(project, count=10, parallelism=None):
    array = {"count": count} | ({"parallelism": parallelism} if parallelism else {})
    return arrays.array_submit(project=project, spec=dict(SPEC), array=array, depends_on=[])


def test_progress_splits_the_bar_by_outcome():
    p = progress({"succeeded": 5, "failed": 1, "lost": 1, "running": 2, "queued": 1}, 10)
    assert dict(p["segments"]) == {"ok": 50.0, "bad": 20.0, "run": 20.0, "queue": 10.0}
    assert (p["succeeded"], p["failed"], p["running"], p["queued"]) == (5, 2, 2, 1)


def test_the_job_list_shows_an_array_as_one_row_with_its_progress(signed_in, project):
    arr = make_array(project, 10, parallelism=4)
    Job.objects.filter(array=arr, array_index__in=[0, 1, 2]).update(state="succeeded")
    body = signed_in.get("/jobs/").content.decode()
    rows = body.split('id="array-rows"')[1].split("</table>")[0]
    assert rows.count("data-array=") == 1 and f'href="/arrays/{arr.pk}/"' in rows
    assert 'class="abar"' in rows and "3/10 succeeded" in rows and "1 queued" in rows and "6 waiting" in rows
    assert 'data-job="' not in body  # tasks are not rows of their own


def test_the_array_page_lists_tasks_and_cancels_the_array(signed_in, project):
    arr = make_array(project, 3)
    body = signed_in.get(f"/arrays/{arr.pk}/").content.decode()
    assert body.count("data-job=") == 3 and "0/3 succeeded" in body
    signed_in.post(f"/arrays/{arr.pk}/cancel/")
    assert set(Job.objects.filter(array=arr).values_list("state", flat=True)) == {"cancelled"}
    signed_in.post(f"/arrays/{arr.pk}/retry/")
    assert set(Job.objects.filter(array=arr).values_list("state", flat=True)) == {"queued"}


def test_the_job_page_links_its_dependencies_and_its_array(signed_in, project):
    arr = make_array(project, 2)
    first = services.job_submit(project=project, spec=dict(SPEC))
    after = services.job_submit(
        project=project, spec={**SPEC, "depends_on": [{"job": first.pk}, {"array": arr.pk, "condition": "ended"}]}
    )
    body = signed_in.get(f"/jobs/{after.pk}/").content.decode()
    deps = body.split('id="dependencies"')[1].split("</dd>")[0]
    assert f'href="/jobs/{first.pk}/"' in deps and f'href="/arrays/{arr.pk}/"' in deps
    assert "waiting for job" in body
    task = Job.objects.get(array=arr, array_index=1)
    body = signed_in.get(f"/jobs/{task.pk}/").content.decode()
    assert f'href="/arrays/{arr.pk}/"' in body.split('id="job-array"')[1] and "task 1 of 2" in body


def test_another_projects_array_page_is_404(signed_in, other_project):
    arr = make_array(other_project, 2)
    assert signed_in.get(f"/arrays/{arr.pk}/").status_code == 404
    assert signed_in.post(f"/arrays/{arr.pk}/cancel/").status_code == 404
