import ipaddress

import pytest

from agents import ssrf

pytestmark = pytest.mark.django_db

# Each is refused at registration; the reason names why.
CORPUS = [
    "http://127.0.0.1/",
    "http://127.1/",
    "http://2130706433/",
    "http://0x7f000001/",
    "http://0177.0.0.1/",
    "http://0/",
    "http://0.0.0.0:8080/",
    "http://[::1]/",
    "http://[::]/",
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:7f00:1]/",
    "http://[::127.0.0.1]/",
    "http://10.0.0.1/",
    "http://172.16.5.4/",
    "http://192.168.1.1/",
    "http://169.254.169.254/latest/meta-data/",
    "http://100.100.100.200/latest/meta-data/",
    "http://100.64.0.1/",
    "http://[fc00::1]/",
    "http://[fd12:3456::1]/",
    "http://[fe80::1]/",
    "http://[64:ff9b::7f00:1]/",
    "http://[64:ff9b::a9fe:a9fe]/",
    "http://[2002:7f00:1::]/",
    "http://[2002:a9fe:a9fe::1]/",
    "http://224.0.0.1/",
    "http://[ff02::1]/",
    "http://240.0.0.1/",
    "http://255.255.255.255/",
    "http://198.18.0.1/",
    "http://192.0.0.8/",
    "http://metadata.google.internal/computeMetadata/v1/",
    "http://metadata.tencentyun.com/",
    "http://METADATA.GOOGLE.INTERNAL./",
    "http://localhost:8000/",
    "http://app.localhost/",
    "ftp://example.com/",
    "file:///etc/passwd",
    "gopher://127.0.0.1:6379/_INFO",
    "http://user:pass@example.com/",
    "http://example.com@127.0.0.1/",
    "http:///nohost",
    "http://[::ffff:169.254.169.254]/",
    "http://[2001:db8::1]/",
]


@pytest.mark.parametrize("url", CORPUS)
def test_the_guard_refuses_each_url_of_the_ssrf_corpus(url, settings):
    settings.EULER_AGENT_ALLOWED_NETWORKS = []
    assert ssrf.check_url(url) is not None


@pytest.mark.parametrize("url", CORPUS)
def test_registration_refuses_each_url_of_the_ssrf_corpus_with_forbidden_address(url, api, settings):
    settings.EULER_AGENT_ALLOWED_NETWORKS = []
    response = api.post("/api/v1/agents", {"name": "probe", "instances": [{"base_url": url}]}, format="json")
    assert response.status_code == 400
    assert response.json()["code"] == "forbidden_address"
    assert response.json()["reason"]
    assert api.get("/api/v1/agents").json()["count"] == 0


def test_the_corpus_holds_at_least_thirty_vectors():
    assert len(CORPUS) >= 30


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("100.100.100.200", "carrier-grade NAT"),
        ("::ffff:10.1.2.3", "RFC 1918"),
        ("64:ff9b::1.2.3.4", "NAT64"),
        ("2002:0808:0808::1", "6to4"),
        ("0.1.2.3", "0.0.0.0/8"),
        ("fe80::1%eth0", "link-local"),
    ],
)
def test_the_reason_names_the_range(address, reason):
    assert reason in ssrf.address_refusal(address)


def test_a_global_address_passes():
    assert ssrf.refusal("https://api.example.com/v1", ["93.184.216.34", "2606:2800:220:1::1"]) is None


def test_one_internal_address_among_public_ones_is_enough_to_refuse():
    assert "loopback" in ssrf.refusal("https://x.example.com", ["93.184.216.34", "127.0.0.1"])


def test_an_allowed_network_opens_its_range_only():
    allowed = ssrf.parse_networks(["10.20.0.0/16"])
    assert ssrf.address_refusal("10.20.1.1", allowed) is None
    assert ssrf.address_refusal("10.21.1.1", allowed) is not None


def test_a_name_that_does_not_resolve_is_refused(monkeypatch):
    monkeypatch.setattr(ssrf, "resolver", lambda host, port: (_ for _ in ()).throw(OSError("nx")))
    assert "does not resolve" in ssrf.check_url("https://nowhere.invalid/")


def test_a_bad_allowed_network_is_a_configuration_error():
    with pytest.raises(ValueError, match="not an IP network"):
        ssrf.parse_networks(["10.0.0.0/33"])


def test_numeric_spellings_resolve_as_the_os_does():
    assert ssrf.resolve("2130706433", 80) == ["127.0.0.1"]
    assert ipaddress.ip_address(ssrf.resolve("0x7f000001", 80)[0]).is_loopback
