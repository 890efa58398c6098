"""The pure parts of the agent's registry client: the address policy of each dial, the texts a failure class
shows, manifests and platforms, the engine's insecure-registry rule, and the tag a digest is loaded under."""

from __future__ import annotations

import json

import pytest

from nodeagent import images
from nodeagent.imageref import parse
from nodeagent.offer import load_image_policy
from nodeagent.registry import failure, insecure_registry, manifest
from nodeagent.registry.dial import DialPolicy, refusal
from nodeagent.registry.session import parse_challenge

POLICY = DialPolicy.of(allowed=["10.8.0.0/16"], blocked=["203.0.113.0/24", "10.8.9.0/24"], open_hosts=["mirror.lan"])
HEX = "a" * 64


@pytest.mark.parametrize(
    ("host", "port", "addresses", "refused"),
    [
        ("registry.example", 443, ["93.184.216.34"], False),
        ("registry.example", 443, ["93.184.216.34", "127.0.0.1"], True),  # any address refused: refused
        ("registry.example", 443, ["169.254.169.254"], True),
        ("registry.example", 443, ["100.100.100.200"], True),
        ("registry.example", 443, ["::ffff:10.0.0.1"], True),
        ("registry.example", 443, ["10.8.1.2"], False),  # the lender's allowed CIDR
        ("registry.example", 443, ["10.8.9.2"], True),  # ... unless also blocked
        ("registry.example", 443, ["203.0.113.7"], True),  # the lender's blocked public range
        ("registry.example", 443, [], True),  # does not resolve
        ("registry.example", 443, None, True),  # not in time
        ("metadata.google.internal", 80, ["93.184.216.34"], True),
        ("mirror.lan", 5000, ["192.168.1.10"], False),  # a registry the lender names: any address
        ("mirror.lan.", 5000, ["192.168.1.10"], False),
    ],
)
def test_each_dial_passes_the_nodes_address_policy(host, port, addresses, refused):
    assert (refusal(POLICY, host, port, addresses) is not None) is refused


def test_the_pull_obeys_the_jobs_allowed_and_blocked_networks():
    policy = load_image_policy(
        {"EULER_NODE_JOB_ALLOWED_NETWORKS": "10.8.0.0/16", "EULER_NODE_JOB_BLOCKED_NETWORKS": "203.0.113.0/24"}
    )
    assert policy.allowed_networks == ("10.8.0.0/16",) and policy.blocked_networks == ("203.0.113.0/24",)


def test_every_failure_class_has_one_fixed_text_that_names_no_address():
    kinds = [getattr(failure, n) for n in dir(failure) if n.isupper()]
    texts = [images.failure_text(k) for k in kinds]
    assert len(set(texts)) == len(kinds)
    assert images.failure_text("anything else") == images.UNREACHABLE
    assert not any(ch.isdigit() for ch in images.failure_text(failure.REFUSED))


def test_a_challenge_is_read():
    assert parse_challenge('Bearer realm="https://auth.example/token",service="reg",scope="repository:a:pull"') == (
        "bearer",
        {"realm": "https://auth.example/token", "service": "reg", "scope": "repository:a:pull"},
    )
    assert parse_challenge('Basic realm="x"')[0] == "basic"


def _entry(arch, digest, variant=None):
    platform = {"os": "linux", "architecture": arch, **({"variant": variant} if variant else {})}
    return {"mediaType": next(iter(manifest.IMAGE_TYPES)), "digest": digest, "size": 1, "platform": platform}


def test_an_index_resolves_to_this_engines_platform():
    a, b, c = ("sha256:" + x * 64 for x in "abc")
    doc = {"manifests": [_entry("arm64", a, "v8"), _entry("amd64", b), _entry("arm64", c)]}
    assert manifest.pick_platform(doc, os="linux", arch="amd64") == b
    assert manifest.pick_platform(doc, os="linux", arch="arm64") == a  # the default variant first
    with pytest.raises(manifest.Unsupported):
        manifest.pick_platform(doc, os="linux", arch="s390x")


def test_a_manifest_is_checked_before_any_blob_is_fetched():
    good = {
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": f"sha256:{HEX}", "size": 9},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": f"sha256:{HEX}", "size": 5}],
    }
    image = manifest.image_of(manifest.load(json.dumps(good).encode(), ""))
    assert image.total == 14 and image.layers[0].hex == HEX
    for bad in (
        {**good, "layers": [{**good["layers"][0], "digest": "sha256:../../etc"}]},
        {**good, "layers": [{**good["layers"][0], "size": -1}]},
        {**good, "layers": [{**good["layers"][0], "mediaType": "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip"}]},
        {**good, "config": {**good["config"], "size": 9 * 1024**2}},
        {**good, "mediaType": "application/vnd.docker.distribution.manifest.v1+prettyjws"},
    ):  # fmt: skip
        with pytest.raises(manifest.Unsupported):
            manifest.image_of(manifest.load(json.dumps(bad).encode(), ""))


def test_the_engines_insecure_registry_rule_is_dockerds():
    config = {"InsecureRegistryCIDRs": ["127.0.0.0/8"], "IndexConfigs": {"docker.io": {"Secure": True}}}
    assert insecure_registry(config, parse("registry.test:5000/x"), ["127.0.0.1"])
    assert not insecure_registry(config, parse("registry.test:5000/x"), ["93.184.216.34"])
    assert not insecure_registry(config, parse("alpine"), ["127.0.0.1"])
    assert insecure_registry({"IndexConfigs": {"mirror.lan:5000": {"Secure": False}}}, parse("mirror.lan:5000/x"), [])
    assert not insecure_registry(None, parse("registry.test/x"), ["127.0.0.1"])


def test_a_digest_is_loaded_under_a_tag_derived_from_it():
    assert images.loaded_tag(parse("alpine")) == "docker.io/library/alpine:latest"
    assert images.loaded_tag(parse("ghcr.io/o/x:1")) == "ghcr.io/o/x:1"
    assert images.loaded_tag(parse(f"ghcr.io/o/x:1@sha256:{HEX}")) == f"ghcr.io/o/x:euler-sha256-{HEX}"
