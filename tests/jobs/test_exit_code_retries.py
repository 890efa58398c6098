"""Retries by exit code through the node protocol: 75 twice, then 0, ends succeeded after three attempts."""

from __future__ import annotations

import pytest

from jobs.models import Job
from tests.jobs.conftest import seed_body
from tests.jobs.test_lifecycle import node_client, placed, report  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db


def test_a_job_exiting_75_twice_then_0_succeeds_on_its_third_attempt(placed, node_client, schedule):  # noqa: F811
    # Delays of a minute and more: the test moves time on itself (not_before), and no pause of a loaded machine between
    # a report and the next pass may run a retry's delay out (with 1 s, one did).
    job_id, attempt, node, cred = placed(
        retry_on=[{"exit_codes": [75, "128-143"]}],
        max_retries=3,
        retry_backoff={"initial": 60, "factor": 3, "max": 600},
    )
    for code in (75, 75, 0):
        attempt = Job.objects.get(pk=job_id).current_attempt
        assert report(node_client, cred, attempt.pk, state="running").status_code == 200
        assert report(node_client, cred, attempt.pk, state="ended", reason="exited", exit_code=code).status_code == 200
        job = Job.objects.get(pk=job_id)
        if code:
            assert job.state == "queued" and job.not_before is not None
            assert schedule().placed == 0  # not placed before its time
            Job.objects.filter(pk=job_id).update(not_before=None)  # time passes
            assert schedule().placed == 1
    job = Job.objects.get(pk=job_id)
    assert job.state == "succeeded" and job.attempts.count() == 3 and job.retries_used == 2
    retries = [e.message for e in job.events.filter(to_state="queued", from_state="running")]
    assert len(retries) == 2
    assert "exit code 75 matched 75" in retries[0] and "retry 1 of 3 in " in retries[0]
    assert "exit code 75 matched 75" in retries[1] and "retry 2 of 3 in " in retries[1]
    first, second = (float(m.split(" in ")[1].split("s,")[0]) for m in retries)
    assert 48 <= first <= 60 and 144 <= second <= 180  # initial 60, factor 3, jitter at most 20%


def test_an_exit_code_not_listed_ends_the_job_failed(placed, node_client):  # noqa: F811
    job_id, attempt, node, cred = placed(retry_on=[{"exit_codes": ["128-143"]}], max_retries=3)
    report(node_client, cred, attempt.pk, state="ended", reason="exited", exit_code=75)
    job = Job.objects.get(pk=job_id)
    assert job.state == "failed" and job.exit_code == 75


@pytest.mark.parametrize(
    "field, value, code",
    [
        ("retry_on", [{"exit_codes": [256]}], "invalid_exit_codes"),
        ("retry_on", [{"exit_codes": ["143-128"]}], "invalid_exit_codes"),
        ("retry_on", [{"exit_codes": "75"}], "invalid_exit_codes"),
        ("retry_on", [{"codes": [75]}], "invalid_retry_on"),
        ("retry_backoff", {"initial": -1}, "invalid_retry_backoff"),
        ("retry_backoff", {"factor": "x"}, "invalid_retry_backoff"),
        ("retry_backoff", [1], "invalid_retry_backoff"),
    ],
)
def test_the_api_refuses_bad_exit_codes_and_backoff_with_a_code(api, field, value, code):
    r = api.post("/api/v1/jobs", seed_body(**{field: value}), format="json")
    assert r.status_code == 400, r.content
    assert r.json()["code"] == code


def test_the_api_stores_the_normalized_policy(api):
    body = seed_body(retry_on=["failed", {"exit_codes": ["128-143", 75]}], retry_backoff={"initial": 3})
    r = api.post("/api/v1/jobs", body, format="json")
    assert r.status_code == 201, r.content
    assert r.json()["retry_on"] == ["failed", {"exit_codes": [75, "128-143"]}]
    assert r.json()["retry_backoff"] == {"initial": 3.0}
