from datetime import timedelta

import pytest
from django.utils import timezone

from euler.errors import Conflict, InvalidInput, NotFound
from euler.tokens import digest
from quotas import invitations, members
from quotas.invitations import InvitationClosed
from quotas.models import Invitation, Membership, Role

pytestmark = pytest.mark.django_db


def test_it_stores_only_the_digest_of_the_token(project, owner):
    new = invitations.invitation_create(project=project, by=owner)
    row = Invitation.objects.get(pk=new.invitation.pk)
    assert new.token.startswith("euler_inv_")
    assert row.token_hash == digest(new.token)
    assert new.token not in str(Invitation.objects.filter(pk=row.pk).values().first())
    assert new.url.endswith(f"/join/{new.token}")
    assert row.expires_at - row.created_at > timedelta(days=6, hours=23)


def test_a_second_user_joins_once_and_the_link_then_refuses(project, make_user):
    new = invitations.invitation_create(project=project, role=Role.MEMBER)
    carol, dave = make_user("carol"), make_user("dave")
    membership = invitations.invitation_accept(token=new.token, user=carol)
    assert membership.project == project and membership.role == Role.MEMBER
    with pytest.raises(InvitationClosed) as exc:
        invitations.invitation_accept(token=new.token, user=dave)
    assert exc.value.code == "invitation_used"
    assert not Membership.objects.filter(user=dave).exists()


def test_an_owner_invitation_grants_the_owner_role(project, make_user):
    new = invitations.invitation_create(project=project, role=Role.OWNER)
    assert invitations.invitation_accept(token=new.token, user=make_user("carol")).role == Role.OWNER


def test_an_expired_link_grants_nothing(project, make_user):
    new = invitations.invitation_create(project=project)
    Invitation.objects.filter(pk=new.invitation.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    with pytest.raises(InvitationClosed) as exc:
        invitations.invitation_accept(token=new.token, user=make_user("carol"))
    assert exc.value.code == "invitation_expired"


def test_a_revoked_link_grants_nothing(project, make_user):
    new = invitations.invitation_create(project=project)
    invitations.invitation_revoke(project=project, invitation_id=new.invitation.pk)
    with pytest.raises(InvitationClosed) as exc:
        invitations.invitation_accept(token=new.token, user=make_user("carol"))
    assert exc.value.code == "invitation_revoked"


@pytest.mark.parametrize("token", ["", "nope", "euler_inv_", "euler_inv_short", "euler_inv_" + "x" * 43])
def test_an_unknown_token_is_not_found(project, make_user, token):
    invitations.invitation_create(project=project)
    with pytest.raises(NotFound):
        invitations.invitation_accept(token=token, user=make_user("carol"))


def test_a_token_with_a_known_prefix_but_wrong_body_is_not_found(project, make_user):
    new = invitations.invitation_create(project=project)
    forged = new.token[:-4] + ("AAAA" if not new.token.endswith("AAAA") else "BBBB")
    with pytest.raises(NotFound):
        invitations.invitation_accept(token=forged, user=make_user("carol"))


def test_a_member_opening_the_link_leaves_it_open(project, owner, make_user):
    new = invitations.invitation_create(project=project)
    with pytest.raises(Conflict) as exc:
        invitations.invitation_accept(token=new.token, user=owner)
    assert exc.value.code == "already_member"
    invitations.invitation_accept(token=new.token, user=make_user("carol"))


def test_it_refuses_an_unknown_role_and_a_too_long_life(project):
    with pytest.raises(InvalidInput):
        invitations.invitation_create(project=project, role="admin")
    with pytest.raises(InvalidInput):
        invitations.invitation_create(project=project, ttl=timedelta(days=365))


def test_revoking_another_projects_invitation_is_not_found(project, other_project):
    new = invitations.invitation_create(project=other_project)
    with pytest.raises(NotFound):
        invitations.invitation_revoke(project=project, invitation_id=new.invitation.pk)


def test_the_last_owner_can_be_neither_removed_nor_demoted(project, owner):
    with pytest.raises(Conflict) as exc:
        members.member_remove(project=project, user_id=owner.pk)
    assert exc.value.code == "last_owner"
    with pytest.raises(Conflict):
        members.member_change_role(project=project, user_id=owner.pk, role=Role.MEMBER)


def test_an_owner_steps_down_once_another_owner_exists(project, owner, make_user):
    carol = make_user("carol")
    Membership.objects.create(project=project, user=carol, role=Role.MEMBER)
    members.member_change_role(project=project, user_id=carol.pk, role=Role.OWNER)
    members.member_change_role(project=project, user_id=owner.pk, role=Role.MEMBER)
    members.member_remove(project=project, user_id=owner.pk)
    assert list(members.members_of(project).values_list("user__username", flat=True)) == ["carol"]
