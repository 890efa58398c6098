import pytest
from rest_framework.test import APIClient

from quotas.models import Invitation, Membership, Role

pytestmark = pytest.mark.django_db


def session_client(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_an_owner_creates_a_link_shown_once(api):
    created = api.post("/api/v1/project/invitations", {"role": "owner", "expires_in_days": 2}, format="json")
    assert created.status_code == 201
    body = created.json()
    assert body["token"].startswith("euler_inv_") and body["url"].endswith("/join/" + body["token"])
    assert body["role"] == "owner" and body["state"] == "open"
    listed = api.get("/api/v1/project/invitations").json()["results"]
    assert [item["id"] for item in listed] == [body["id"]]
    assert body["token"] not in str(listed)


@pytest.mark.parametrize(
    "payload, code",
    [
        ({"role": "admin"}, "invalid_choice"),
        ({"expires_in_days": 0}, "min_value"),
        ({"expires_in_days": 365}, "max_value"),
        ({"token": "mine"}, "unknown_field"),
    ],
)
def test_bad_invitation_input_is_a_clear_400(api, payload, code):
    response = api.post("/api/v1/project/invitations", payload, format="json")
    assert response.status_code == 400
    assert response.json()["code"] == code


def test_a_plain_member_cannot_invite_or_manage_members(project, owner, make_user):
    carol = make_user("carol")
    Membership.objects.create(project=project, user=carol, role=Role.MEMBER)
    client = session_client(carol)
    assert client.get("/api/v1/project/members").status_code == 200
    response = client.post("/api/v1/project/invitations", {}, format="json")
    assert response.status_code == 403 and response.json()["code"] == "owner_required"
    assert client.delete(f"/api/v1/project/members/{owner.pk}").status_code == 403
    assert client.patch(f"/api/v1/project/members/{carol.pk}", {"role": "owner"}, format="json").status_code == 403


def test_owners_list_promote_and_remove_members(project, owner, make_user):
    carol = make_user("carol")
    Membership.objects.create(project=project, user=carol, role=Role.MEMBER)
    client = session_client(owner)
    listed = client.get("/api/v1/project/members").json()["results"]
    assert [(m["username"], m["role"]) for m in listed] == [("olivia", "owner"), ("carol", "member")]
    promoted = client.patch(f"/api/v1/project/members/{carol.pk}", {"role": "owner"}, format="json")
    assert promoted.status_code == 200 and promoted.json()["role"] == "owner"
    assert client.delete(f"/api/v1/project/members/{carol.pk}").status_code == 204
    assert not Membership.objects.filter(user=carol).exists()


def test_removing_the_last_owner_is_a_409(project, owner):
    response = session_client(owner).delete(f"/api/v1/project/members/{owner.pk}")
    assert response.status_code == 409
    assert response.json()["code"] == "last_owner"


def test_another_projects_member_and_invitation_answer_404(api, other_project):
    from quotas.invitations import invitation_create

    bob = Membership.objects.get(project=other_project).user
    new = invitation_create(project=other_project)
    assert api.delete(f"/api/v1/project/members/{bob.pk}").status_code == 404
    assert api.patch(f"/api/v1/project/members/{bob.pk}", {"role": "member"}, format="json").status_code == 404
    assert api.delete(f"/api/v1/project/invitations/{new.invitation.pk}").status_code == 404
    assert Invitation.objects.get(pk=new.invitation.pk).revoked_at is None


def test_revoking_a_link_answers_204_and_it_shows_revoked(api):
    created = api.post("/api/v1/project/invitations", {}, format="json").json()
    assert api.delete(f"/api/v1/project/invitations/{created['id']}").status_code == 204
    listed = api.get("/api/v1/project/invitations").json()["results"]
    assert listed[0]["state"] == "revoked"


def test_anonymous_callers_are_refused(anon):
    assert anon.get("/api/v1/project/members").status_code in (401, 403)
    assert anon.post("/api/v1/project/invitations", {}, format="json").status_code in (401, 403)
