"""OIDC login against a real provider process (oidc-provider-mock), full authorization-code flow."""

import subprocess
import sys
import time

import httpx
import pytest
import requests
from django.contrib.auth import get_user_model
from django.test import override_settings

from audit.models import AuditEvent
from quotas.models import Membership, Project, Quota
from tests.ports import free_port

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def provider():
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "oidc_provider_mock", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while True:
        try:
            if httpx.get(f"{base}/.well-known/openid-configuration", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            pytest.fail("oidc-provider-mock did not start")
        time.sleep(0.1)
    yield base
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture
def oidc(provider):
    config = httpx.get(f"{provider}/.well-known/openid-configuration").json()
    with override_settings(
        OIDC_ENABLED=True,
        AUTHENTICATION_BACKENDS=["quotas.oidc.EulerOIDCBackend", "django.contrib.auth.backends.ModelBackend"],
        OIDC_RP_CLIENT_ID="euler-tests",
        OIDC_RP_CLIENT_SECRET="euler-tests-secret",
        OIDC_OP_AUTHORIZATION_ENDPOINT=config["authorization_endpoint"],
        OIDC_OP_TOKEN_ENDPOINT=config["token_endpoint"],
        OIDC_OP_USER_ENDPOINT=config["userinfo_endpoint"],
        OIDC_OP_JWKS_ENDPOINT=config["jwks_uri"],
        OIDC_RP_SIGN_ALGO="RS256",
    ):
        yield provider


def _login(live_server, provider: str, sub: str) -> requests.Session:
    browser = requests.Session()
    start = browser.get(f"{live_server.url}/oidc/authenticate/", timeout=10)
    assert start.status_code == 200 and start.url.startswith(provider), start.url
    done = browser.post(start.url, data={"sub": sub}, timeout=10)
    assert done.status_code == 200, done.text[:500]
    assert done.url.rstrip("/") == live_server.url, done.url
    return browser


def test_first_login_creates_the_user_a_default_project_and_its_quota(live_server, oidc):
    httpx.put(f"{oidc}/users/alice-sub", json={"email": "alice@example.com", "preferred_username": "alice"})
    browser = _login(live_server, oidc, "alice-sub")

    user = get_user_model().objects.get(oidc_identity__subject="alice-sub")
    assert user.username == "alice" and user.email == "alice@example.com"
    membership = Membership.objects.get(user=user)
    assert membership.role == "owner"
    assert Quota.objects.filter(project=membership.project).exists()
    signed_in = AuditEvent.objects.get(action="login.succeeded")
    assert (signed_in.actor, signed_in.details) == ("user:alice", {"method": "oidc"})

    api = browser.get(f"{live_server.url}/api/v1/project", timeout=10)
    assert api.status_code == 200
    assert api.json()["name"] == membership.project.name


def test_a_second_login_creates_nothing(live_server, oidc):
    httpx.put(f"{oidc}/users/carol-sub", json={"email": "carol@example.com", "preferred_username": "carol"})
    _login(live_server, oidc, "carol-sub")
    users, projects = get_user_model().objects.count(), Project.objects.count()
    _login(live_server, oidc, "carol-sub")
    assert get_user_model().objects.count() == users
    assert Project.objects.count() == projects


def test_the_login_page_offers_the_provider_button_when_configured(live_server, oidc):
    page = requests.get(f"{live_server.url}/login/", timeout=10)
    assert "E时代通行证" in page.text


def test_the_login_page_falls_back_to_a_password_form_without_oidc(live_server):
    page = requests.get(f"{live_server.url}/login/", timeout=10)
    assert "E时代通行证" not in page.text
    assert 'name="password"' in page.text
