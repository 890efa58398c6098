"""The console's My machines page: the lender's machines with their chart, and the terms form."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.lending.conftest import lent_node  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db


@pytest.fixture
def session(owner, project):
    c = Client()
    c.force_login(owner)
    return c


def test_the_page_lists_the_lenders_machines_with_a_chart(session, owner, lent_node, make_user):  # noqa: F811
    lent_node(owner, name="mine")
    lent_node(make_user("olga"), name="theirs")
    r = session.get("/lending/")
    assert r.status_code == 200
    body = r.content.decode()
    assert 'data-machine="mine"' in body and "theirs" not in body
    assert '<figure class="chart">' in body and "data-reliability" in body


def test_the_terms_form_sets_terms_and_shows_a_refusal(session, owner, lent_node):  # noqa: F811
    node = lent_node(owner, name="mine")
    form = {"timezone": "Asia/Shanghai", "windows": "weekdays 20:00-08:00\nweekends 00:00-00:00", "max_gpus": "0",
            "max_job_hours": "6"}  # fmt: skip
    assert session.post("/lending/mine/terms/", form).status_code == 302
    node.refresh_from_db()
    assert node.lender_terms["windows"][0]["days"] == ["mon", "tue", "wed", "thu", "fri"]
    assert node.lender_terms["max_job_hours"] == 6.0
    session.post("/lending/mine/terms/", {"max_cpu_milli": "999999"})
    page = session.get("/lending/").content.decode()
    assert "above the approved capacity" in page
    node.refresh_from_db()
    assert node.lender_terms["max_job_hours"] == 6.0  # the refused change changed nothing


def test_another_users_machine_answers_404(session, lent_node, make_user):  # noqa: F811
    lent_node(make_user("olga"), name="theirs")
    assert session.post("/lending/theirs/terms/", {"max_job_hours": "1"}).status_code == 404


def test_the_page_speaks_chinese(session, owner, lent_node):  # noqa: F811
    lent_node(owner, name="mine")
    session.post("/i18n/setlang/", {"language": "zh-hans", "next": "/lending/"})
    body = session.get("/lending/").content.decode()
    assert "我的机器" in body and "保存条款" in body


def test_the_reclaim_and_resume_buttons_take_the_machine_back_and_give_it_again(session, owner, lent_node):  # noqa: F811
    from audit.models import AuditEvent

    node = lent_node(owner, name="mine")
    assert 'value="reclaim"' in session.get("/lending/").content.decode()
    assert session.post("/lending/mine/reclaim/", {"action": "reclaim", "grace": "20"}).status_code == 302
    node.refresh_from_db()
    assert node.reclaimed_at is not None and node.reclaimed_by == "lender" and node.reclaim_count == 1
    page = session.get("/lending/").content.decode()
    assert 'value="resume"' in page and "Reclaimed since" in page
    session.post("/lending/mine/reclaim/", {"action": "resume"})
    node.refresh_from_db()
    assert node.reclaimed_at is None and node.reclaim_count == 1
    assert AuditEvent.objects.filter(action="node.resumed", target="node:mine").exists()


def test_a_bad_grace_is_shown_and_changes_nothing(session, owner, lent_node, settings):  # noqa: F811
    settings.EULER_MAX_STOP_GRACE = 60
    node = lent_node(owner, name="mine")
    session.post("/lending/mine/reclaim/", {"action": "reclaim", "grace": "600"})
    assert "data-reclaim-error" in session.get("/lending/").content.decode()
    node.refresh_from_db()
    assert node.reclaimed_at is None


def test_another_users_machine_cannot_be_reclaimed(session, lent_node, make_user):  # noqa: F811
    node = lent_node(make_user("olga"), name="theirs")
    assert session.post("/lending/theirs/reclaim/", {"action": "reclaim"}).status_code == 404
    node.refresh_from_db()
    assert node.reclaimed_at is None
