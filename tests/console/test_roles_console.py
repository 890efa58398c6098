"""The console says what each role may do and hides what a member may not; password sign-in is throttled."""

from __future__ import annotations

import random

import pytest
from django.test import Client

from audit.models import AuditEvent
from euler.redis import client as redis
from quotas.models import ApiKey, Membership, Role
from quotas.services import apikey_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def mia(make_user, project):
    user = make_user("mia")
    Membership.objects.create(project=project, user=user, role=Role.MEMBER)
    return user


def test_a_member_sees_key_roles_and_no_revoke_button_on_someone_elses_key(project, owner, mia):
    theirs, _ = apikey_create(project=project, by=owner, label="olivia's key")
    mine, _ = apikey_create(project=project, by=mia, label="mia's key")
    c = Client()
    c.force_login(mia)
    page = c.get("/keys/").content.decode()
    assert "olivia&#x27;s key" in page or "olivia's key" in page
    assert f"/keys/{mine.pk}/revoke/" in page and f"/keys/{theirs.pk}/revoke/" not in page
    assert '<option value="owner"' not in page  # a member cannot make an owner key
    # And the server agrees when the form is forged.
    c.post(f"/keys/{theirs.pk}/revoke/")
    assert ApiKey.objects.get(pk=theirs.pk).revoked_at is None
    c.post("/keys/", {"label": "forged", "role": "owner"})
    assert not ApiKey.objects.filter(label="forged").exists()


def test_an_owner_sees_every_revoke_button_and_may_make_owner_keys(project, owner, mia):
    theirs, _ = apikey_create(project=project, by=mia, label="mia's key")
    c = Client()
    c.force_login(owner)
    page = c.get("/keys/").content.decode()
    assert f"/keys/{theirs.pk}/revoke/" in page and '<option value="owner"' in page


def test_a_member_sees_no_owner_actions_on_the_members_page(project, mia):
    c = Client()
    c.force_login(mia)
    page = c.get("/members/").content.decode()
    assert "/remove/" not in page and "/role/" not in page


@pytest.fixture
def fresh_login_counters():
    yield
    for key in redis().scan_iter(match="euler:rl:login*"):
        redis().delete(key)


def an_address() -> str:
    return f"10.{random.randrange(256)}.{random.randrange(256)}.{random.randrange(1, 255)}"


def test_password_sign_in_is_throttled_with_a_clear_message_and_an_audit_trail(
    make_user, settings, fresh_login_counters
):
    settings.EULER_LOGIN_FAILURES_PER_15_MINUTES = 3
    make_user("lena", password="the-right-one")
    guesser = Client(REMOTE_ADDR=an_address())
    codes = [guesser.post("/login/", {"username": "lena", "password": f"wrong{i}"}).status_code for i in range(3)]
    assert codes == [200, 200, 200]
    held = guesser.post("/login/", {"username": "lena", "password": "the-right-one"})
    assert held.status_code == 429 and int(held["Retry-After"]) >= 1
    assert "Too many failed sign-ins" in held.content.decode()
    assert AuditEvent.objects.filter(action="login.throttled", target="user:lena").count() == 1
    # Lena at her own desk is not locked out by a guesser elsewhere.
    assert (
        Client(REMOTE_ADDR=an_address()).post("/login/", {"username": "lena", "password": "the-right-one"}).status_code
        == 302
    )
