"""A lender's terms: validated, set only by the node's lender, audited, and applied by the scheduler."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from .conftest import GIB

pytestmark = pytest.mark.django_db

NIGHTS = {"days": ["weekdays"], "start": "20:00", "end": "08:00"}


@pytest.fixture
def mine(owner, project, lent_node):
    return lent_node(owner, project=project, name="mine", disk_bytes=100 * GIB, approved_disk_bytes=100 * GIB)


def test_the_lender_sets_and_reads_terms(owner_api, mine, project):
    body = {
        "timezone": "Asia/Shanghai",
        "windows": [NIGHTS],
        "max_cpu_milli": 4000,
        "max_gpus": 0,
        "allowed_projects": [project.name],
        "max_job_hours": 6,
    }
    r = owner_api.put("/api/v1/lending/mine/terms", body, format="json")
    assert r.status_code == 200, r.content
    terms = r.json()["terms"]
    assert terms["windows"] == [{"days": ["mon", "tue", "wed", "thu", "fri"], "start": "20:00", "end": "08:00"}]
    assert (terms["max_cpu_milli"], terms["allowed_projects"], terms["max_job_hours"]) == (4000, ["alpha"], 6.0)
    assert owner_api.get("/api/v1/lending/mine/terms").json()["terms"] == terms
    mine.refresh_from_db()
    assert mine.lender_terms["allowed_project_ids"] == [project.pk]
    assert owner_api.put("/api/v1/lending/mine/terms", {}, format="json").json()["terms"] is None


def test_a_term_change_is_audited(owner_api, mine):
    from audit.models import AuditEvent

    owner_api.put("/api/v1/lending/mine/terms", {"max_job_hours": 1}, format="json")
    event = AuditEvent.objects.get(action="node.terms_changed")
    assert event.target == "node:mine" and event.details["after"]["max_job_hours"] == 1.0


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"max_cpu_milli": 9000}, "cap_above_approved"),
        ({"max_memory_bytes": 17 * GIB}, "cap_above_approved"),
        ({"max_gpus": 1}, "cap_above_approved"),
        ({"max_cpu_milli": -1}, "invalid_terms"),
        ({"timezone": "Mars/Olympus"}, "invalid_timezone"),
        ({"windows": [{"days": ["someday"], "start": "20:00", "end": "08:00"}]}, "invalid_window"),
        ({"windows": [{"days": ["mon"], "start": "8pm", "end": "08:00"}]}, "invalid_window"),
        ({"allowed_projects": ["nope"]}, "unknown_project"),
        ({"max_job_hours": 0}, "invalid_terms"),
        ({"cpu": 1}, "unknown_field"),
    ],
)
def test_bad_terms_get_a_400_and_change_nothing(owner_api, mine, body, code):
    r = owner_api.put("/api/v1/lending/mine/terms", body, format="json")
    assert (r.status_code, r.json()["code"]) == (400, code)
    mine.refresh_from_db()
    assert mine.lender_terms == {}


def test_only_the_lender_sees_or_sets_a_machines_terms(owner_api, client_for, other_project, make_user, lent_node):
    from quotas.services import apikey_create

    lent_node(make_user("olga"), name="theirs")
    assert owner_api.get("/api/v1/lending/theirs/terms").status_code == 404
    assert owner_api.put("/api/v1/lending/theirs/terms", {"max_job_hours": 1}, format="json").status_code == 404
    _, key = apikey_create(project=other_project, label="beta, by nobody")
    assert client_for(key).get("/api/v1/lending/theirs/terms").status_code == 404


def _job(submit_api, **over):
    body = {"name": "t", "image": "euler-test/busybox", "command": ["true"], "cpu_milli": 500,
            "memory_bytes": 64 << 20, "timeout_seconds": 60, **over}  # fmt: skip
    r = submit_api.post("/api/v1/jobs", body, format="json")
    assert r.status_code == 201, r.content
    return r.json()["id"]


def _set(node, **terms):
    from lending.terms import terms_set

    terms_set(node=node, data=terms, by=None)


def _placed(job_id) -> str | None:
    from jobs.models import Job
    from jobs.scheduling import cycle

    cycle.one_pass()
    job = Job.objects.select_related("current_attempt").get(pk=job_id)
    return job.current_attempt.node_name if job.current_attempt else job.pending_reason


def _window(now, *, closes_in: timedelta) -> dict:
    """A window (UTC) open since an hour ago that closes `closes_in` from now (whole minutes, rounded up)."""
    start = now - timedelta(hours=1)
    end = now + closes_in + timedelta(seconds=60 - (now + closes_in).second)
    days = sorted({start.strftime("%a").lower(), end.strftime("%a").lower()})
    return {"days": days, "start": start.strftime("%H:%M"), "end": end.strftime("%H:%M")}


def test_a_window_closing_soon_gets_a_short_job_but_not_a_long_one(owner_api, api, mine):
    _set(mine, windows=[_window(timezone.now(), closes_in=timedelta(seconds=90))])
    long_job = _job(api, timeout_seconds=600)
    assert _placed(long_job).startswith("no node fits: 1 close their availability window before the job's timeout")
    assert _placed(_job(api, timeout_seconds=30)) == "mine"


def test_outside_its_windows_a_node_gets_nothing(api, mine):
    now = timezone.now()
    later = now + timedelta(hours=3)
    _set(mine, windows=[{"days": [later.strftime("%a").lower()], "start": later.strftime("%H:%M"),
                         "end": (later + timedelta(hours=1)).strftime("%H:%M")}])  # fmt: skip
    assert _placed(_job(api)) == "no node fits: 1 are outside their lenders' availability windows"


def test_caps_allowed_projects_and_hours_keep_jobs_away(api, other_api, mine, project):
    _set(mine, max_cpu_milli=400)
    assert _placed(_job(api)) == "no node fits: 1 lack 500 free millicores"
    _set(mine, max_job_hours=0.01)
    assert _placed(_job(api)) == "no node fits: 1 take no job this long (their lenders' max_job_hours)"
    _set(mine, allowed_projects=["alpha"])
    assert _placed(_job(api)) == "mine"
