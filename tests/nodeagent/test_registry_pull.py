"""Pulls through the agent's own registry client against a registry on loopback, on the real engine: a hostile
registry's token realm, redirects and rebinding name never reach a private address (a listener there sees no
connection), and an image it serves honestly is pulled, loaded and runs."""

from __future__ import annotations

import uuid

import docker
import pytest
from docker import errors as derrors

from nodeagent import imageref, images
from nodeagent.docker_runner import RunnerError
from nodeagent.images import ImageStore
from nodeagent.offer import ImagePolicy
from nodeagent.registry import failure

from .fakeregistry import Listener, Registry, image_from_engine
from .test_executor import FakeControlPlane, assignment, make_executor, node, plane, wait_for  # noqa: F401, F811

pytestmark = pytest.mark.docker

BUSYBOX = "euler-test/busybox"
PRIVATE = "127.0.0.2"  # another loopback address: never allowed
REFUSED = images.TEXTS[failure.REFUSED]


@pytest.fixture(scope="module")
def blobs(docker_engine):
    return image_from_engine(docker.from_env().api, BUSYBOX)


class Names:
    """The fake DNS: `registry.test` is the registry (127.0.0.1, the one address the test allows); `rebind.test`
    answers the registry's address once, then a private one."""

    def __init__(self):
        self.rebind = 0

    def __call__(self, host: str) -> list[str]:
        if host == "registry.test":
            return ["127.0.0.1"]
        if host == "rebind.test":
            self.rebind += 1
            return ["127.0.0.1"] if self.rebind == 1 else [PRIVATE]
        return []


@pytest.fixture
def world(blobs, monkeypatch, tmp_path):
    """(registry, listener at the private address on the registry's port, the store, the repository's name)."""
    repository = f"euler-pull-{uuid.uuid4().hex[:8]}/busybox"
    registry = Registry(*blobs, repository=repository)
    listener = Listener(PRIVATE, registry.port)
    names = Names()
    monkeypatch.setattr(imageref, "resolver", names)
    api = docker.from_env().api
    store = ImageStore(api, tmp_path, ImagePolicy(allowed_networks=("127.0.0.1/32",)))
    name = f"registry.test:{registry.port}/{repository}"
    yield registry, listener, store, name
    listener.close()
    registry.close()
    for image in api.images(name=name):
        for tag in image.get("RepoTags") or []:
            if tag.startswith(name):
                api.remove_image(tag)


def test_the_listener_counts_a_connection(world):
    """The control: the listener at the private address does see a connection made to it."""
    import socket

    _, listener, _, _ = world
    socket.create_connection((PRIVATE, listener.sock.getsockname()[1]), timeout=5).close()
    assert listener.seen.wait(10)


def _refused(store: ImageStore, image: str) -> str:
    with pytest.raises(RunnerError) as err:
        store.ensure(image, trust="platform")
    assert err.value.reason == "image_pull_failed"
    return err.value.message


def test_a_token_realm_at_a_private_address_is_never_dialled(world):
    registry, listener, store, name = world
    registry.realm = f"http://{PRIVATE}:{registry.port}/token"
    assert _refused(store, f"{name}:1") == REFUSED
    assert listener.accepted == 0
    assert registry.requests == [f"/v2/{registry.repository}/manifests/1"]  # asked, answered 401, went no further


def test_a_blob_redirect_to_a_private_address_is_never_followed(world):
    registry, listener, store, name = world
    registry.redirect = {"layer": f"http://{PRIVATE}:{registry.port}/direct/{{digest}}"}
    assert _refused(store, f"{name}:1") == REFUSED
    assert listener.accepted == 0
    assert any("/blobs/" in path for path in registry.requests)


def test_a_manifest_redirect_to_the_metadata_name_is_never_followed(world):
    registry, listener, store, name = world
    registry.redirect = {"manifest": "http://metadata.google.internal/computeMetadata/v1/"}
    assert _refused(store, f"{name}:1") == REFUSED
    assert listener.accepted == 0


def test_a_rebinding_name_is_dialled_only_at_the_address_that_was_checked(world):
    """`rebind.test` answers the registry's own address first (the config blob comes through it), then a private
    one (the layer): that connection is refused, whatever a check before it saw."""
    registry, listener, store, name = world
    where = f"http://rebind.test:{registry.port}/direct/{{digest}}"
    registry.redirect = {"config": where, "layer": where}
    assert _refused(store, f"{name}:1") == REFUSED
    assert listener.accepted == 0
    assert f"/direct/{registry.config_digest}" in registry.requests  # the first answer was dialled, as checked


def test_the_failure_texts_do_not_tell_an_open_private_port_from_a_closed_one(world):
    registry, listener, store, name = world
    registry.redirect = {"layer": f"http://{PRIVATE}:{registry.port}/direct/{{digest}}"}
    open_port = _refused(store, f"{name}:1")
    listener.close()
    closed_port = _refused(store, f"{name}:1")
    assert open_port == closed_port == REFUSED
    assert PRIVATE not in open_port and str(registry.port) not in open_port


def test_a_registry_that_is_not_allowed_is_refused_before_any_connection(blobs, monkeypatch, tmp_path):
    registry = Registry(*blobs, repository="x/busybox")
    try:
        monkeypatch.setattr(imageref, "resolver", Names())
        store = ImageStore(docker.from_env().api, tmp_path, ImagePolicy())  # no allowed CIDR: loopback is not
        assert _refused(store, f"registry.test:{registry.port}/x/busybox:1") == REFUSED
        assert registry.requests == []
    finally:
        registry.close()


def test_blobs_that_do_not_match_their_digest_are_not_loaded(world):
    registry, _, store, name = world
    registry.corrupt = True
    assert _refused(store, f"{name}:1") == images.UNSUPPORTED
    with pytest.raises(derrors.ImageNotFound):
        docker.from_env().api.inspect_image(f"{name}:1")


def test_an_image_is_pulled_through_a_token_and_a_redirect_and_runs(world, make_executor, plane):  # noqa: F811
    registry, listener, _, name = world
    registry.realm = f"http://registry.test:{registry.port}/token"  # an allowed realm: the token is fetched
    registry.redirect = {"layer": f"http://registry.test:{registry.port}/direct/{{digest}}"}
    ex = make_executor(images=ImagePolicy(allowed_networks=("127.0.0.1/32",)))
    ex.handle_assignment(assignment(31, ["echo", "pulled"], image=f"{name}:multi", node_trust="community"))
    ended = wait_for(lambda: plane.ended(31), "the ended report")
    assert ended["reason"] == "exited", ended
    assert "pulled" in plane.log(31)
    assert listener.accepted == 0
    image_id = docker.from_env().api.inspect_image(f"{name}:multi")["Id"]
    assert image_id in ex.images.pulled()  # recorded as Euler's: a community node runs it again


def test_an_image_pulled_by_digest_runs_by_that_digest(world, make_executor, plane):  # noqa: F811
    registry, _, _, name = world
    ex = make_executor(images=ImagePolicy(allowed_networks=("127.0.0.1/32",)))
    pinned = f"{name}@{registry.manifest_digest}"
    ex.handle_assignment(assignment(32, ["echo", "pinned"], image=pinned, node_trust="community"))
    ended = wait_for(lambda: plane.ended(32), "the ended report")
    assert ended["reason"] == "exited", ended
    assert "pinned" in plane.log(32)
    assert ex.images.runnable(pinned) == images.loaded_tag(imageref.parse(pinned))


def test_the_user_sees_the_policys_text_in_the_ended_report(world, make_executor, plane):  # noqa: F811
    registry, listener, _, name = world
    registry.realm = f"http://{PRIVATE}:{registry.port}/token"
    ex = make_executor(images=ImagePolicy(allowed_networks=("127.0.0.1/32",)))
    ex.handle_assignment(assignment(33, ["true"], image=f"{name}:1", node_trust="platform"))
    ended = wait_for(lambda: plane.ended(33), "the ended report")
    assert (ended["reason"], ended["message"]) == ("image_pull_failed", REFUSED)
    assert listener.accepted == 0


def test_an_unknown_tag_is_not_found_and_a_credentials_challenge_is_unauthorized(world):
    registry, _, store, name = world
    assert _refused(store, f"{name}:absent") == images.NOT_FOUND
    registry.realm = "unused"
    registry.route = _basic_challenge
    assert _refused(store, f"{name}:1") == images.UNAUTHORIZED


def _basic_challenge(h) -> None:
    h._send(401, b"{}", [("WWW-Authenticate", 'Basic realm="registry"')])


def test_an_image_past_the_size_bound_is_refused_before_any_layer_is_fetched(world, monkeypatch):
    registry, _, store, name = world
    monkeypatch.setattr(images, "MAX_IMAGE_BYTES", 1000)
    assert _refused(store, f"{name}:1") == images.TOO_LARGE
    assert not any(registry.config_digest not in path and "/blobs/" in path for path in registry.requests)
