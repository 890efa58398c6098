import pytest

from euler.redis import client

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_windows():
    for key in client().scan_iter(match="euler:rl:apikey*"):
        client().delete(key)
    yield
    for key in client().scan_iter(match="euler:rl:apikey*"):
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
    # A good key is never held back by someone else's failures, even from the same address.
    assert client_for(api_key).get("/api/v1/project").status_code == 200


def test_a_thousand_bogus_keys_from_one_address_do_not_lock_out_a_valid_key_from_it(client_for, api_key):
    import secrets

    codes = {
        client_for("euler_pk_" + secrets.token_urlsafe(32)).get("/api/v1/project", REMOTE_ADDR="127.0.0.1").status_code
        for _ in range(1000)
    }
    assert codes <= {401, 429}
    assert client_for(api_key).get("/api/v1/project", REMOTE_ADDR="127.0.0.1").status_code == 200


def test_bogus_keys_are_counted_per_prefix_first_and_per_address_at_a_higher_rate(client_for, settings):
    settings.EULER_AUTH_FAILURES_PER_MINUTE = 2
    settings.EULER_AUTH_FAILURES_PER_ADDRESS_PER_MINUTE = 5
    same = client_for("euler_pk_" + "S" * 43)
    assert [same.get("/api/v1/project").status_code for _ in range(3)] == [401, 401, 429]
    fresh = [client_for(f"euler_pk_{i:02d}" + "F" * 41).get("/api/v1/project").status_code for i in range(3)]
    assert fresh == [401, 401, 429]  # the address has now failed 6 times, past its 5
    elsewhere = client_for("euler_pk_" + "E" * 43).get("/api/v1/project", REMOTE_ADDR="10.9.9.9")
    assert elsewhere.status_code == 401


def test_forwarded_for_counts_only_from_a_trusted_proxy(settings):
    from euler.ratelimit import address_behind_proxies

    settings.EULER_TRUSTED_PROXIES = []
    assert address_behind_proxies("10.0.0.2", "203.0.113.9") == "10.0.0.2"
    settings.EULER_TRUSTED_PROXIES = ["10.0.0.0/24"]
    assert address_behind_proxies("10.0.0.2", "203.0.113.9") == "203.0.113.9"
    assert address_behind_proxies("10.0.0.2", "6.6.6.6, 203.0.113.9, 10.0.0.7") == "203.0.113.9"
    assert address_behind_proxies("192.0.2.1", "203.0.113.9") == "192.0.2.1"  # not a proxy of ours
    assert address_behind_proxies("10.0.0.2", "junk") == "10.0.0.2"


def test_good_keys_are_not_counted(client_for, settings, api_key):
    settings.EULER_AUTH_FAILURES_PER_MINUTE = 2
    good = client_for(api_key)
    assert all(good.get("/api/v1/project").status_code == 200 for _ in range(5))
