"""GET /api/v1/lending: a lender's machines, what runs there (named only where the lender is a member), hours
per day, losses; and what a lender never reaches: another project's job, its env, logs and outputs."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction

pytestmark = pytest.mark.django_db


@pytest.fixture
def busy_machine(owner, project, other_project, lent_node, running_attempt):
    """The owner's machine runs one job of alpha (theirs) and one of beta (someone else's, with env); it lost one
    earlier attempt and finished another."""
    from jobs import attempts

    node = lent_node(owner, name="mine", gpus=1)
    ours = running_attempt(project, node)
    theirs = running_attempt(other_project, node, env={"TOKEN": "s3cret"}, has_env=True)
    for outcome, reason in (("succeeded", "exited"), ("lost", "lost")):
        a = running_attempt(project, node, seconds=3600, gpus=1)
        with transaction.atomic():
            attempts.end_attempt(a.pk, a.job_id, outcome=outcome, reason=reason, now=a.started_at + timedelta(hours=1))
    return node, ours, theirs


def test_the_lender_sees_state_running_jobs_hours_and_losses(owner_api, busy_machine, project):
    node, ours, theirs = busy_machine
    r = owner_api.get("/api/v1/lending")
    assert r.status_code == 200, r.content
    (m,) = r.json()["machines"]
    assert (m["name"], m["state"], m["trust"]) == ("mine", "online", "platform")
    assert m["running"] == {"jobs": [{"job_id": ours.job_id, "project": "alpha"}], "other_jobs": 1}
    assert m["last_30_days"]["lost_attempts"] == 1 and m["last_30_days"]["attempts"] == 2
    assert sum(d["cpu_hours"] for d in m["daily"]) == 2.0  # the finished hour at 2 cores; the lost one earns none
    assert sum(d["gpu_hours"] for d in m["daily"]) == 1.0
    assert len(m["daily"]) == 30 and 0 <= m["reliability"]["score"] <= 100
    assert "s3cret" not in r.content.decode() and "env" not in r.content.decode()


def test_a_user_who_lent_nothing_sees_no_machines(api, busy_machine):
    assert api.get("/api/v1/lending").json() == {"machines": []}  # an operator's key: made by nobody


def test_a_lender_cannot_read_the_env_logs_or_outputs_of_another_projects_job_on_their_machine(owner_api, busy_machine):
    _, _, theirs = busy_machine
    job = theirs.job_id
    for path in (
        f"/api/v1/jobs/{job}",
        f"/api/v1/jobs/{job}/logs",
        f"/api/v1/jobs/{job}/outputs",
        f"/api/v1/jobs/{job}/outputs.tar",
        f"/api/v1/jobs/{job}/outputs/x.txt",
    ):
        r = owner_api.get(path)
        assert r.status_code == 404, (path, r.status_code)
        assert b"s3cret" not in r.content
    shown = owner_api.get("/api/v1/lending").json()["machines"][0]["running"]
    assert job not in [j["job_id"] for j in shown["jobs"]] and shown["other_jobs"] == 1
    for path in ("/api/v1/lending", "/api/v1/lending/mine/terms", "/api/v1/ledger?group_by=project"):
        body = owner_api.get(path).content.decode()
        assert "s3cret" not in body and "beta" not in body, path
