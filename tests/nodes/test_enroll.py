from datetime import timedelta

import pytest
from django.utils import timezone

from nodes.models import Approval, EnrollmentToken, EventKind, Node, TrustLevel
from nodes.services import enrollment_token_create
from tests.nodes.conftest import resources

pytestmark = pytest.mark.django_db

ENROLL = "/node-api/v1/enroll"


def test_a_platform_token_enrolls_a_pending_platform_node_and_returns_its_credential_once(platform_token, node_client):
    r = node_client().post(ENROLL, {"token": platform_token, "name": "gpu-1", "resources": resources()}, format="json")
    assert r.status_code == 201
    body = r.json()
    assert body["approval"] == "pending" and body["credential"].startswith("euler_node_")
    node = Node.objects.get(pk=body["node_id"])
    assert node.trust == TrustLevel.PLATFORM and node.owner_project is None
    assert body["credential"] not in node.credential_digest and node.credential_digest
    assert node.events.filter(kind=EventKind.ENROLLED).exists()


def test_a_used_token_is_refused_with_401_enrollment_token_used(platform_token, enroll, node_client):
    enroll(platform_token, "n1")
    r = node_client().post(ENROLL, {"token": platform_token, "name": "n2", "resources": resources()}, format="json")
    assert r.status_code == 401 and r.json()["code"] == "enrollment_token_used"


def test_an_expired_token_is_refused_with_401_enrollment_token_expired(platform_token, node_client):
    EnrollmentToken.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    r = node_client().post(ENROLL, {"token": platform_token, "name": "n1", "resources": resources()}, format="json")
    assert r.status_code == 401 and r.json()["code"] == "enrollment_token_expired"


def test_an_unknown_token_is_refused_with_401(node_client):
    r = node_client().post(
        ENROLL, {"token": "euler_enroll_" + "x" * 40, "name": "n1", "resources": resources()}, format="json"
    )
    assert r.status_code == 401 and r.json()["code"] == "invalid_enrollment_token"


def test_the_token_is_stored_only_as_a_hash(platform_token):
    token = EnrollmentToken.objects.get()
    assert platform_token not in (token.digest, token.lookup) and token.digest


@pytest.mark.parametrize(
    "over",
    [
        {"name": "bad name!"},
        {"name": "x" * 64},
        {"labels": {"ok": "no spaces here"}},
        {"labels": {"": "v"}},
        {"region": "eu west"},
        {"privileged": True},
    ],
)
def test_bad_names_labels_and_unknown_fields_get_400_and_leave_the_token_unused(platform_token, node_client, over):
    body = {"token": platform_token, "name": "n1", "resources": resources(), **over}
    r = node_client().post(ENROLL, body, format="json")
    assert r.status_code == 400 and r.json()["code"] == "invalid_enrollment"
    assert EnrollmentToken.objects.get().used_at is None


def test_a_taken_name_is_a_409_and_the_token_stays_usable(make_user, enroll, node_client):
    staff = make_user("ops", staff=True)
    _, t1 = enrollment_token_create(trust="platform", by=staff)
    _, t2 = enrollment_token_create(trust="platform", by=staff)
    enroll(t1, "same")
    r = node_client().post(ENROLL, {"token": t2, "name": "same", "resources": resources()}, format="json")
    assert r.status_code == 409 and r.json()["code"] == "node_name_taken"
    enroll(t2, "other")


def test_a_project_token_enrolls_a_node_owned_by_the_project_with_the_tokens_region_and_labels(project, enroll):
    _, secret = enrollment_token_create(project=project, region="cn-hz", labels={"tier": "a"})
    node, _ = enroll(secret, "mine", labels={"disk": "ssd"})
    assert node.owner_project == project and node.trust == TrustLevel.UNTRUSTED
    assert node.region == "cn-hz" and node.labels == {"tier": "a", "disk": "ssd"}
    assert node.approval == Approval.PENDING


def test_a_project_cannot_make_a_platform_token(project):
    from euler.errors import Forbidden

    with pytest.raises(Forbidden):
        enrollment_token_create(project=project, trust="platform")


def test_an_auto_approve_token_approves_the_node_at_once_in_debug(settings, enroll):
    settings.DEBUG = True
    _, secret = enrollment_token_create(trust="platform", auto_approve=True)
    node, _ = enroll(secret, "dev")
    assert node.approval == Approval.APPROVED and node.public_pool


def test_plain_http_from_outside_the_allowed_networks_gets_403_https_required(platform_token, node_client):
    c = node_client(REMOTE_ADDR="203.0.113.9")
    r = c.post(ENROLL, {"token": platform_token, "name": "n1", "resources": resources()}, format="json")
    assert r.status_code == 403 and r.json()["code"] == "https_required"


def test_https_behind_a_tls_proxy_is_accepted_from_anywhere(platform_token, node_client, settings):
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    c = node_client(REMOTE_ADDR="203.0.113.9", HTTP_X_FORWARDED_PROTO="https")
    r = c.post(ENROLL, {"token": platform_token, "name": "n1", "resources": resources()}, format="json")
    assert r.status_code == 201
