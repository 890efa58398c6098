import pytest

from quotas.invitations import invitation_create, invitation_revoke
from quotas.models import Membership, Role

pytestmark = pytest.mark.django_db


@pytest.fixture
def link(signed_in, project):
    """An invitation link created through the members page, as the owner sees it once."""
    body = signed_in.post("/members/", {"role": "member", "expires_in_days": "7"}).content.decode()
    start = body.index("http://")
    url = body[start : body.index("<", start)]
    assert "/join/euler_inv_" in url
    signed_in.logout()
    return url[url.index("/join/") :]


def test_an_anonymous_visitor_is_asked_to_sign_in_and_nothing_is_used(browser_client, link):
    body = browser_client.get(link).content.decode()
    assert "alpha" in body and 'id="join-signin"' in body
    response = browser_client.post(link)
    assert response.status_code == 302 and response["Location"].startswith("/login/")


def test_a_second_user_joins_once_and_a_third_is_refused(browser_client, link, project, make_user):
    browser_client.force_login(make_user("carol"))
    response = browser_client.post(link)
    assert response.status_code == 302
    assert Membership.objects.get(user__username="carol").project == project
    browser_client.force_login(make_user("dave"))
    refused = browser_client.post(link)
    assert refused.status_code == 410
    assert "already been used" in refused.content.decode()
    assert not Membership.objects.filter(user__username="dave").exists()


def test_opening_the_link_does_not_use_it(browser_client, link, make_user):
    browser_client.force_login(make_user("carol"))
    assert browser_client.get(link).status_code == 200
    assert browser_client.get(link).status_code == 200
    assert not Membership.objects.filter(user__username="carol").exists()


def test_a_revoked_link_says_so(browser_client, project, make_user):
    new = invitation_create(project=project, role=Role.OWNER)
    invitation_revoke(project=project, invitation_id=new.invitation.pk)
    browser_client.force_login(make_user("carol"))
    response = browser_client.post(f"/join/{new.token}")
    assert response.status_code == 410 and "revoked" in response.content.decode()


def test_a_made_up_link_is_not_found(browser_client):
    response = browser_client.get("/join/euler_inv_" + "A" * 43)
    assert response.status_code == 404
    assert "not valid" in response.content.decode()
