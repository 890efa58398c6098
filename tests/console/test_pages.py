import pytest

from quotas.models import ApiKey, Invitation, Membership, Role

pytestmark = pytest.mark.django_db

PAGES = ["/", "/jobs/", "/jobs/new/", "/nodes/", "/agents/", "/keys/", "/members/", "/usage/"]


@pytest.mark.parametrize("url", PAGES)
def test_every_page_renders_for_a_signed_in_member(signed_in, url):
    response = signed_in.get(url)
    assert response.status_code == 200
    assert b"<main" in response.content


@pytest.mark.parametrize("url", PAGES)
def test_every_page_sends_an_anonymous_visitor_to_the_login(browser_client, url):
    response = browser_client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


def test_the_login_page_offers_username_and_password_when_oidc_is_off(browser_client, settings):
    settings.OIDC_ENABLED = False
    body = browser_client.get("/login/").content.decode()
    assert 'name="username"' in body and 'name="password"' in body
    assert "oidc-login" not in body


def test_the_login_page_offers_the_oidc_button_when_oidc_is_on(browser_client, settings):
    settings.OIDC_ENABLED = True
    body = browser_client.get("/login/").content.decode()
    assert "E时代通行证" in body and 'id="oidc-login"' in body
    assert 'name="password"' not in body


def test_a_user_without_a_project_is_told_how_to_get_one(browser_client, make_user):
    browser_client.force_login(make_user("loner"))
    response = browser_client.get("/keys/")
    assert response.status_code == 200
    assert b"invitation link" in response.content


def test_creating_a_key_shows_the_secret_once_and_never_again(signed_in, project):
    created = signed_in.post("/keys/", {"label": "laptop"})
    assert created["Cache-Control"] == "no-store"
    key = ApiKey.objects.get(project=project, label="laptop")
    body = created.content.decode()
    start = body.index("euler_pk_" + key.prefix)
    secret = body[start : body.index("<", start)]
    assert len(secret) > 40
    assert secret not in signed_in.get("/keys/").content.decode()


def test_revoking_a_key_from_the_console_revokes_it(signed_in, project):
    signed_in.post("/keys/", {"label": "old"})
    key = ApiKey.objects.get(project=project, label="old")
    signed_in.post(f"/keys/{key.pk}/revoke/")
    key.refresh_from_db()
    assert key.revoked_at is not None


def test_another_projects_key_cannot_be_revoked(signed_in, other_project):
    from quotas.services import apikey_create

    key, _ = apikey_create(project=other_project, label="theirs")
    signed_in.post(f"/keys/{key.pk}/revoke/")
    key.refresh_from_db()
    assert key.revoked_at is None


def test_the_project_switch_only_moves_to_projects_of_the_user(signed_in, owner, other_project, make_user):
    from quotas.services import project_create

    mine = project_create(name="gamma", owner=owner)
    signed_in.post("/project/switch/", {"project": str(other_project.pk), "next": "/"})
    assert b"gamma" in signed_in.get("/").content  # the switcher lists both of the user's projects
    assert b'<h1>Dashboard <span class="muted">alpha' in signed_in.get("/").content
    signed_in.post("/project/switch/", {"project": str(mine.pk), "next": "https://evil.example/"})
    assert b'<h1>Dashboard <span class="muted">gamma' in signed_in.get("/").content


def test_the_language_switch_serves_chinese(signed_in):
    signed_in.post("/i18n/setlang/", {"language": "zh-hans", "next": "/"})
    body = signed_in.get("/").content.decode()
    assert "仪表盘" in body and 'lang="zh-hans"' in body


def test_the_browser_language_is_the_default(browser_client):
    body = browser_client.get("/login/", headers={"accept-language": "zh-CN,zh;q=0.9"}).content.decode()
    assert "登录" in body


def test_a_plain_member_sees_members_but_cannot_invite(browser_client, project, make_user):
    carol = make_user("carol")
    Membership.objects.create(project=project, user=carol, role=Role.MEMBER)
    browser_client.force_login(carol)
    body = browser_client.get("/members/").content.decode()
    assert "olivia" in body and 'id="invite-create"' not in body
    assert browser_client.post("/members/", {"role": "owner"}).status_code == 403
    assert not Invitation.objects.exists()


def test_the_nodes_page_shows_disk_the_lenders_caps_and_the_job_network(signed_in, project):
    from nodes.models import Node

    common = dict(owner_project=project, approval="approved", online=True, cpu_milli=2000, memory_bytes=4 << 30)
    Node.objects.create(name="capped", disk_bytes=50 << 30, capped=["cpu", "disk"], job_egress="public", **common)
    Node.objects.create(name="open", job_egress="unrestricted", **common)
    Node.objects.create(name="broken", job_egress="public", job_egress_error="iptables: Permission denied", **common)
    body = signed_in.get("/nodes/").content.decode()
    assert "capped by the lender: cpu, disk" in body and "0.0 / 50.0 GiB" in body
    assert "unrestricted egress" in body and "internet only" in body
    assert "refuses networked jobs" in body and "iptables: Permission denied" in body
