"""Image references by Docker's grammar, the registry policy and the lender's patterns: pure."""

from __future__ import annotations

import pytest

from nodeagent import imageref
from nodeagent.imageref import ImageRef, InvalidReference, parse
from nodeagent.offer import OfferError, load_image_policy

DIGEST = "sha256:" + "a" * 64


@pytest.mark.parametrize(
    ("text", "registry", "repository", "tag", "digest"),
    [
        ("alpine", "docker.io", "library/alpine", None, None),
        ("alpine:3.20", "docker.io", "library/alpine", "3.20", None),
        ("euler-test/busybox", "docker.io", "euler-test/busybox", None, None),
        ("docker.io/alpine", "docker.io", "library/alpine", None, None),
        ("index.docker.io/library/alpine:1", "docker.io", "library/alpine", "1", None),
        ("ghcr.io/org/tool:v1.2", "ghcr.io", "org/tool", "v1.2", None),
        ("localhost/x", "localhost", "x", None, None),
        ("localhost:5000/x", "localhost:5000", "x", None, None),
        ("127.0.0.1:5000/x/y:z", "127.0.0.1:5000", "x/y", "z", None),
        ("[::1]:5000/x", "[::1]:5000", "x", None, None),
        ("Registry/x", "registry", "x", None, None),  # upper case: only a registry may have it
        (f"alpine@{DIGEST}", "docker.io", "library/alpine", None, DIGEST),
        (f"ghcr.io/a/b:t@{DIGEST}", "ghcr.io", "a/b", "t", DIGEST),
        ("a__b/c.d-e--f", "docker.io", "a__b/c.d-e--f", None, None),
    ],
)
def test_it_parses_references_the_way_docker_does(text, registry, repository, tag, digest):
    assert parse(text) == ImageRef(registry=registry, repository=repository, tag=tag, digest=digest)


@pytest.mark.parametrize(
    "text",
    ["", "Not An Image!", "UPPER", "a/B", "x:", "x:-bad", "a//b", "-a", "a@sha256:12", "a" * 64, 42, None,
     "x/" + "a" * 300, "host:port/x", "x_/y", "a/b:" + "t" * 129],
)  # fmt: skip
def test_it_refuses_what_docker_refuses(text):
    with pytest.raises(InvalidReference):
        parse(text)


def test_ports_hosts_and_the_string_form():
    ref = parse("registry.example:5000/team/app:1")
    assert (ref.host, ref.port, ref.pull_tag, str(ref)) == ("registry.example", 5000, "1", str(ref))
    assert parse("[fd00::1]:5000/x").host == "fd00::1" and parse("[fd00::1]:5000/x").port == 5000
    assert parse("alpine").pull_tag == "latest" and parse(f"alpine@{DIGEST}").pull_tag is None
    assert str(parse("alpine")) == "docker.io/library/alpine"


@pytest.mark.parametrize(
    "text",
    ["127.0.0.1:5000/x", "localhost:5000/x", "localhost/x", "10.1.2.3/x", "192.168.0.9:443/x", "8.8.8.8/x",
     "[::1]:5000/x", "metadata.google.internal/x", "registry.localhost/x", "printer.local/x"],
)  # fmt: skip
def test_ip_literals_and_local_names_are_refused_from_their_form(text):
    assert imageref.form_refusal(parse(text))
    assert imageref.registry_refusal(parse(text), None)


@pytest.mark.parametrize("address", ["10.0.0.5", "127.0.0.1", "169.254.169.254", "100.100.100.200", "fd00::1"])
def test_a_name_resolving_to_a_non_public_address_is_refused(address):
    why = imageref.registry_refusal(parse("registry.example/x"), [address])
    assert why and "not on the public internet" in why


def test_a_public_name_and_docker_hub_pass_and_an_allow_list_opens_hosts():
    assert imageref.registry_refusal(parse("registry.example/x"), ["93.184.216.34"]) is None
    assert imageref.registry_refusal(parse("alpine"), None) is None
    assert imageref.registry_refusal(parse("10.1.2.3:5000/x"), None, allowed=["10.1.2.3:5000"]) is None
    assert imageref.registry_refusal(parse("registry.lan:5000/x"), ["10.0.0.7"], allowed=["registry.lan"]) is None
    assert imageref.registry_refusal(parse("registry.lan:5001/x"), ["10.0.0.7"], allowed=["registry.lan:5000"])
    assert (
        imageref.registry_refusal(parse("registry.example/x"), []) == "the registry registry.example does not resolve"
    )


def test_check_resolves_and_at_submit_lets_an_unresolvable_name_through(monkeypatch):
    answers = {"private.example": ["10.9.8.7"], "public.example": ["93.184.216.34"], "nowhere.example": []}
    monkeypatch.setattr(imageref, "resolver", lambda host: answers[host])
    assert imageref.check(parse("private.example/x"), unresolved_ok=True)
    assert imageref.check(parse("public.example/x"), unresolved_ok=True) is None
    assert imageref.check(parse("nowhere.example/x"), unresolved_ok=True) is None
    assert imageref.check(parse("nowhere.example/x"), unresolved_ok=False)


@pytest.mark.parametrize(
    ("image", "patterns", "allowed"),
    [
        ("alpine:3.20", ("alpine",), True),
        ("alpine:3.20", ("docker.io",), True),
        ("alpine:3.20", ("ghcr.io",), False),
        ("ghcr.io/org/tool:1", ("ghcr.io/org/*",), True),
        ("ghcr.io/other/tool:1", ("ghcr.io/org/*",), False),
        ("myorg/app", ("myorg/*",), True),
        ("registry.lan:5000/x", ("registry.lan:5000",), True),
        ("anything/at:all", (), True),
        ("not valid!", ("*",), False),
    ],
)
def test_the_lenders_patterns(image, patterns, allowed):
    assert imageref.allowed_by(image, patterns) is allowed


def test_registries_a_lender_names_are_the_ones_it_opens():
    assert imageref.named_registries(["registry.lan:5000", "ghcr.io/org/*", "alpine", "*", "*.example/x"]) == (
        "registry.lan:5000",
        "ghcr.io",
    )


def test_the_lenders_image_settings_are_read_strictly():
    policy = load_image_policy(
        {"EULER_NODE_ALLOWED_IMAGES": "ghcr.io/org/*, alpine", "EULER_NODE_LOCAL_IMAGES": "true",
         "EULER_NODE_IMAGE_CACHE_BYTES": "1000"}
    )  # fmt: skip
    assert policy.patterns == ("ghcr.io/org/*", "alpine") and policy.local_images and policy.cache_bytes == 1000
    assert load_image_policy({}).cache_bytes == 20 * 1024**3 and not load_image_policy({}).local_images
    for env in ({"EULER_NODE_ALLOWED_IMAGES": "a b"}, {"EULER_NODE_LOCAL_IMAGES": "maybe"},
                {"EULER_NODE_IMAGE_CACHE_BYTES": "-1"}):  # fmt: skip
        with pytest.raises(OfferError):
            load_image_policy(env)
