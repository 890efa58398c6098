"""The console's Activity page (owners only) and the staff's read-only admin list of every project's events."""

import pytest

import audit
from audit.models import AuditEvent
from quotas.models import Membership

pytestmark = pytest.mark.django_db


@pytest.fixture
def events(project, other_project):
    audit.record("api_key.created", project=project, target="api_key:AAAA1111", details={"label": "ci"}, by=None)
    audit.record("node.drained", project=project, target="node:gpu-1")
    audit.record("job.cancelled", project=other_project, target="job:4242")


def test_an_owner_sees_the_projects_events_newest_first_and_no_other_projects(signed_in, events):
    body = signed_in.get("/activity/").content.decode()
    assert "node:gpu-1" in body and "api_key:AAAA1111" in body and "label</span>=ci" in body
    assert body.index("node.drained") < body.index("api_key.created")
    assert "job:4242" not in body
    assert 'href="/activity/"' in body


def test_it_filters_by_family_of_actions_and_ignores_unknown_ones(signed_in, events):
    body = signed_in.get("/activity/?action=node.").content.decode()
    assert "node:gpu-1" in body and "api_key:AAAA1111" not in body
    assert "api_key:AAAA1111" in signed_in.get("/activity/?action=bogus").content.decode()


def test_a_member_is_refused_and_has_no_link(browser_client, project, make_user, events):
    member = make_user("mia")
    Membership.objects.create(project=project, user=member, role="member")
    browser_client.force_login(member)
    assert browser_client.get("/activity/").status_code == 403
    assert 'href="/activity/"' not in browser_client.get("/keys/").content.decode()


def test_it_speaks_chinese(signed_in, events):
    signed_in.post("/i18n/setlang/", {"language": "zh-hans", "next": "/"})
    body = signed_in.get("/activity/").content.decode()
    assert "操作记录" in body and "全部操作" in body


def test_it_pages_fifty_at_a_time(signed_in, project):
    for n in range(55):
        AuditEvent.objects.create(action="job.retried", actor="system", project=project, target=f"job:{n}")
    first = signed_in.get("/activity/").content.decode()
    assert "job:54" in first and "job:4<" not in first and "page=2" in first
    assert "job:4<" in signed_in.get("/activity/?page=2").content.decode()


def test_staff_see_every_projects_events_read_only_in_the_admin(browser_client, make_user, events):
    browser_client.force_login(make_user("root", staff=True))
    body = browser_client.get("/admin/audit/auditevent/").content.decode()
    assert "node:gpu-1" in body and "job:4242" in body
    event = AuditEvent.objects.get(target="job:4242")
    assert browser_client.get("/admin/audit/auditevent/add/").status_code == 403
    assert browser_client.get(f"/admin/audit/auditevent/{event.pk}/delete/").status_code == 403
    detail = browser_client.post(f"/admin/audit/auditevent/{event.pk}/change/", {"action": "job.retried"})
    assert detail.status_code == 403
    assert AuditEvent.objects.get(pk=event.pk).action == "job.cancelled"
