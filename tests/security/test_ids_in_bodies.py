"""Ids that a caller writes into a body or a query string resolve in the caller's project: project beta naming one of
alpha's jobs or arrays in any field gets the 404 that a missing id gets, and nothing is written on either side.
A pending reason reads through the job's own project, so it never tells beta anything about alpha's objects.

The URL side (ids in paths) is test_isolation_matrix.py; the walk of the code is test_scoped_lookups.py.
"""

from __future__ import annotations

import pytest

from tests.jobs.conftest import make_node, seed_body  # noqa: F401 - the jobs tests' node fixture, used here too
from tests.security.test_isolation_matrix import snapshot

pytestmark = pytest.mark.django_db

NOWHERE = 987654321  # no row has this id


def _input(job_id: int) -> list[dict]:
    return [{"job": job_id, "path": "v1/chat", "to": "/in/chat"}]


def _job_body(**over) -> dict:
    return seed_body(name="probe", **over)


# field -> (method, path, body or query built from the id named, which of alpha's ids it names)
FIELDS = {
    "job inputs_from": ("post", "/api/v1/jobs", lambda i: _job_body(inputs_from=_input(i)), "job_id"),
    "array inputs_from": (
        "post", "/api/v1/jobs", lambda i: _job_body(inputs_from=_input(i), array={"count": 2}), "job_id",
    ),
    "job depends_on job": ("post", "/api/v1/jobs", lambda i: _job_body(depends_on=[{"job": i}]), "job_id"),
    "job depends_on array": ("post", "/api/v1/jobs", lambda i: _job_body(depends_on=[{"array": i}]), "array_id"),
    "array depends_on job": (
        "post", "/api/v1/jobs", lambda i: _job_body(depends_on=[{"job": i}], array={"count": 2}), "job_id",
    ),
    "array depends_on array": (
        "post", "/api/v1/jobs", lambda i: _job_body(depends_on=[{"array": i}], array={"count": 2}), "array_id",
    ),
    "jobs list ?array=": ("get", "/api/v1/jobs", lambda i: {"array": i}, "array_id"),
    "schedule job inputs_from": (
        "post", "/api/v1/schedules", lambda i: {"name": "probe", "cron": "0 3 * * *",
                                               "job": _job_body(inputs_from=_input(i))}, "job_id",
    ),
    "schedule job depends_on job": (
        "post", "/api/v1/schedules", lambda i: {"name": "probe", "cron": "0 3 * * *",
                                               "job": _job_body(depends_on=[{"job": i}])}, "job_id",
    ),
    "schedule job depends_on array": (
        "post", "/api/v1/schedules", lambda i: {"name": "probe", "cron": "0 3 * * *",
                                               "job": _job_body(depends_on=[{"array": i}])}, "array_id",
    ),
    "schedule change job inputs_from": (
        "patch", "/api/v1/schedules/mine", lambda i: {"job": _job_body(inputs_from=_input(i))}, "job_id",
    ),
}  # fmt: skip


def _beta_rows(project) -> dict:
    from jobs.models import Job
    from jobs.workflow_models import JobArray
    from workflows.models import Schedule

    return {
        "jobs": Job.objects.filter(project=project).count(),
        "arrays": JobArray.objects.filter(project=project).count(),
        "schedules": sorted(map(repr, Schedule.objects.filter(project=project).values())),
    }


def _call(client, method: str, path: str, payload: dict):
    if method == "get":
        return client.get(path, payload)
    return getattr(client, method)(path, payload, format="json")


@pytest.mark.parametrize("field", sorted(FIELDS))
def test_another_projects_id_in_a_body_or_query_answers_404_like_a_missing_one(
    field, alpha, project, other_project, other_api
):
    method, path, build, which = FIELDS[field]
    other_api.post("/api/v1/schedules", {"name": "mine", "cron": "0 3 * * *", "job": _job_body()}, format="json")
    theirs, before, beta_before = alpha[which], snapshot(project), _beta_rows(other_project)

    answer = _call(other_api, method, path, build(theirs))
    missing = _call(other_api, method, path, build(NOWHERE))

    assert answer.status_code == 404, (field, answer.status_code, answer.json())
    assert answer.json()["code"] == "not_found"
    assert answer.json() == {k: v.replace(str(NOWHERE), str(theirs)) for k, v in missing.json().items()}
    assert snapshot(project) == before, f"{field}: alpha's rows changed"
    assert _beta_rows(other_project) == beta_before, f"{field}: a half-written row in beta"


def test_an_array_naming_another_projects_job_in_inputs_from_is_refused_exactly_as_a_job_is(alpha, other_api):
    """Finding 9 of issue 33: the same inputs_from answered 404 for a job and 201 for an array."""
    job = other_api.post("/api/v1/jobs", _job_body(inputs_from=_input(alpha["job_id"])), format="json")
    array = other_api.post(
        "/api/v1/jobs", _job_body(inputs_from=_input(alpha["job_id"]), array={"count": 3}), format="json"
    )
    assert job.status_code == array.status_code == 404
    assert (
        job.json() == array.json() == {"code": "not_found", "detail": f"No such job: {alpha['job_id']} (inputs_from)."}
    )


def test_the_owner_still_names_its_own_ids_in_every_field(alpha, api):
    """The same bodies from alpha itself pass the id check (what follows is the field's own rule, not a 404)."""
    for field, (method, path, build, which) in FIELDS.items():
        if "schedule change" in field:
            continue
        answer = _call(api, method, path, build(alpha[which]))
        assert answer.status_code != 404, (field, answer.json())


# --- pending reasons ------------------------------------------------------------------------------------------------
def _alpha_job_as(alpha, how: str) -> int:
    """alpha's job in one of the states that the old gate told apart, or an id that no job has."""
    from jobs.models import Job
    from jobs.outputs.models import OutputFile

    job_id = alpha["job_id"]
    if how == "missing":
        return NOWHERE
    if how in ("running, not stored", "failed, not stored"):
        OutputFile.objects.filter(job_id=job_id).delete()
    if how.startswith(("succeeded", "failed")):
        Job.objects.filter(pk=job_id).update(state=how.split(",")[0])
    return job_id


STATES = ("running, stored", "running, not stored", "succeeded, stored", "failed, not stored", "missing")


@pytest.mark.parametrize("how", STATES)
def test_a_pending_reason_tells_nothing_of_another_projects_job(
    how,
    alpha,
    other_project,
    other_api,
    make_node,  # noqa: F811 - the fixture imported above
):
    """An array of beta's whose tasks name alpha's job in inputs_from (as the submit let through before the fix): its
    tasks wait with the reason that an id naming no job gets, whatever alpha's job is, and are never placed."""
    from jobs.models import Attempt, Job
    from jobs.scheduling import cycle

    named = _alpha_job_as(alpha, how)
    array = other_api.post("/api/v1/jobs", _job_body(array={"count": 2}), format="json").json()
    Job.objects.filter(array_id=array["id"]).update(inputs_from=_input(named))
    make_node()

    cycle.one_pass()

    expected = f"input v1/chat of job {named}: no such job in this project (cancel this job)"
    tasks = other_api.get("/api/v1/jobs", {"array": array["id"]}).json()["results"]
    assert [(t["state"], t["pending_reason"]) for t in tasks] == [("queued", expected)] * 2
    assert other_api.get(f"/api/v1/arrays/{array['id']}").json()["pending_reason"] == ""
    assert not Attempt.objects.filter(job__project=other_project).exists()


def test_a_dependency_reason_names_only_the_projects_own_objects(alpha, other_api):
    """depends_on of another project's id is refused at submit, so no dependency row, and no reason, can name it."""
    from jobs.workflow_models import Dependency

    r = other_api.post("/api/v1/jobs", _job_body(depends_on=[{"job": alpha["job_id"]}]), format="json")
    assert r.status_code == 404
    assert not Dependency.objects.filter(on_job_id=alpha["job_id"]).exclude(array_id=alpha["array_id"]).exists()
