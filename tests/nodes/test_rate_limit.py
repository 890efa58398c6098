import random
import time
from types import SimpleNamespace

import pytest

from euler import ratelimit
from tests.nodes.conftest import resources

pytestmark = pytest.mark.django_db


@pytest.fixture
def guesser(settings, node_client, monkeypatch):
    """A client from an address of its own, limit 3 a minute, every request in one window.

    The limiter counts in fixed one-minute windows: four requests that straddle a minute's end would be counted in
    two windows (a 401 where a 429 is due), so its clock stands still mid-window here. The address is new to this
    test (its counters, left by an earlier run on the same Redis, are deleted first)."""
    settings.EULER_AUTH_FAILURES_PER_MINUTE = 3
    settings.EULER_NODE_HTTP_ALLOWED_NETWORKS = ["10.0.0.0/8"]
    addr = f"10.{random.randrange(256)}.{random.randrange(256)}.{random.randrange(1, 255)}"
    redis = ratelimit.client()
    for key in list(redis.scan_iter(match=f"euler:rl:*:{addr}:*")):
        redis.delete(key)
    mid_window = (int(time.time()) // 60) * 60 + 30.0
    monkeypatch.setattr(ratelimit, "time", SimpleNamespace(time=lambda: mid_window))

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
