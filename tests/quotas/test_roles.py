"""A key never outranks its creator; removing or demoting a member revokes or lowers their keys, audited."""

import pytest

from audit.models import AuditEvent
from quotas import members, roles
from quotas.models import ApiKey, Membership, Role
from quotas.services import apikey_authenticate, apikey_create

pytestmark = pytest.mark.django_db


def test_the_lower_role_wins():
    assert roles.lower("owner", "member") == "member"
    assert roles.lower("owner", None) is None
    assert roles.allows("owner", "member") and not roles.allows("member", "owner") and not roles.allows(None, "member")
    assert roles.effective_key_role(key_role="owner", creator_role="member", has_creator=True) == "member"
    assert roles.effective_key_role(key_role="owner", creator_role=None, has_creator=True) is None
    assert roles.effective_key_role(key_role="owner", creator_role=None, has_creator=False) == "owner"


@pytest.fixture
def mia(make_user, project):
    user = make_user("mia")
    Membership.objects.create(project=project, user=user, role=Role.MEMBER)
    return user


def test_a_members_key_cannot_be_made_an_owner_key(project, mia):
    from euler.errors import Forbidden

    key, _ = apikey_create(project=project, by=mia)
    assert key.role == Role.MEMBER
    with pytest.raises(Forbidden) as refused:
        apikey_create(project=project, by=mia, role=Role.OWNER)
    assert refused.value.code == "role_above_creator"


def test_a_key_acts_with_its_creators_current_role(project, owner, mia):
    _, secret = apikey_create(project=project, by=owner)
    assert apikey_authenticate(raw=secret).acting_role == Role.OWNER
    Membership.objects.filter(project=project, user=mia).update(role=Role.OWNER)
    members.member_change_role(project=project, user_id=owner.pk, role=Role.MEMBER)
    key = apikey_authenticate(raw=secret)
    assert (key.role, key.acting_role) == (Role.MEMBER, Role.MEMBER)
    lowered = AuditEvent.objects.get(action="api_key.role_lowered")
    assert lowered.details == {"from": "owner", "to": "member"} and lowered.target == f"api_key:{key.prefix}"


def test_removing_a_member_revokes_their_keys_with_an_audit_entry(project, mia):
    key, secret = apikey_create(project=project, by=mia)
    members.member_remove(project=project, user_id=mia.pk)
    assert apikey_authenticate(raw=secret) is None
    assert ApiKey.objects.get(pk=key.pk).revoked_at is not None
    event = AuditEvent.objects.filter(action="api_key.revoked").get()
    assert event.target == f"api_key:{key.prefix}" and event.details == {"reason": "member.removed"}


def test_a_deleted_user_takes_their_keys_along_and_they_never_pass_for_an_operators(project, mia):
    key, secret = apikey_create(project=project, by=mia)
    mia.delete()
    assert apikey_authenticate(raw=secret) is None
    assert ApiKey.objects.get(pk=key.pk).revoked_at is not None


def test_a_key_whose_creator_left_by_any_door_stops(project, mia):
    _, secret = apikey_create(project=project, by=mia)
    Membership.objects.filter(project=project, user=mia).delete()  # a bulk delete sends the signal too
    assert apikey_authenticate(raw=secret) is None
