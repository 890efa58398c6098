import random

import pytest

from tests.nodes.conftest import resources

pytestmark = pytest.mark.django_db


@pytest.fixture
def guesser(settings, node_client):
    """A client from an address of its own (so that counters never mix between runs), limit 3 a minute."""
    settings.EULER_AUTH_FAILURES_PER_MINUTE = 3
    settings.EULER_NODE_HTTP_ALLOWED_NETWORKS = ["10.0.0.0/8"]
    addr = f"10.{random.randrange(256)}.{random.randrange(256)}.{random.randrange(1, 255)}"

    def make(credential=None):
        return node_client(credential, REMOTE_ADDR=addr)

    return make


def test_guessed_enrollment_tokens_are_limited_per_address(guesser):
    body = {"token": "euler_enroll_" + "g" * 43, "name": "n1", "resources": resources()}
    codes = [guesser().post("/node-api/v1/enroll", body, format="json").status_code for _ in range(4)]
    assert codes == [401, 401, 401, 429]


def test_guessed_node_credentials_are_limited_per_address_on_heartbeat_and_poll(guesser):
    bad = guesser("euler_node_" + "h" * 43)
    body = {"resources": resources()}
    codes = [bad.post("/node-api/v1/heartbeat", body, format="json").status_code for _ in range(3)]
    r = bad.post("/node-api/v1/poll", {"wait": 0}, format="json")
    assert codes == [401, 401, 401] and r.status_code == 429 and r.json()["code"] == "rate_limited"
    assert int(r["Retry-After"]) >= 1
