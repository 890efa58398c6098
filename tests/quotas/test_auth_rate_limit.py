import pytest

from euler.redis import client

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_windows():
    for key in client().scan_iter(match="euler:rl:apikey:*"):
        client().delete(key)
    yield
    for key in client().scan_iter(match="euler:rl:apikey:*"):
        client().delete(key)


def test_repeated_bad_keys_from_one_address_are_answered_429(client_for, settings, api_key):
    settings.EULER_AUTH_FAILURES_PER_MINUTE = 5
    guesser = client_for("euler_pk_" + "G" * 43)
    codes = [guesser.get("/api/v1/project").status_code for _ in range(7)]
    assert codes[:5] == [401] * 5
    assert codes[5:] == [429, 429]
    limited = guesser.get("/api/v1/project")
    assert limited.json()["code"] == "rate_limited"
    assert int(limited["Retry-After"]) >= 1
    # While limited, even a good key from that address waits: guessing cannot be told apart.
    assert client_for(api_key).get("/api/v1/project").status_code == 429


def test_good_keys_are_not_counted(client_for, settings, api_key):
    settings.EULER_AUTH_FAILURES_PER_MINUTE = 2
    good = client_for(api_key)
    assert all(good.get("/api/v1/project").status_code == 200 for _ in range(5))
