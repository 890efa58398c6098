"""The image policy on the agent, against the real engine: no connection to a refused registry, fixed failure
texts, community nodes and local images, and the cache cap (with tiny imported images)."""

from __future__ import annotations

import contextlib
import io
import socket
import tarfile
import threading
import uuid

import docker
import pytest
from docker import errors as derrors

from nodeagent import imageref, images
from nodeagent.docker_runner import RunnerError
from nodeagent.images import ImageStore
from nodeagent.offer import ImagePolicy

from .test_executor import FakeControlPlane, assignment, make_executor, node, plane, wait_for  # noqa: F401, F811

pytestmark = pytest.mark.docker

IMAGE = "euler-test/busybox"


class Listener:
    """A TCP listener on a loopback port that counts the connections it accepts."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            conn.close()

    def close(self):
        # close() alone does not wake a thread blocked in accept() (Linux): each teardown waited out the join's 5 s.
        # shutdown() does: accept() then fails, and the thread returns.
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self.thread.join(timeout=5)
        assert not self.thread.is_alive(), "the listener's thread did not end"


@pytest.fixture
def listener():
    found = Listener()
    yield found
    found.close()


def test_the_engine_would_connect_to_a_loopback_registry_without_the_policy(docker_engine, listener):
    """The control for the test below: the engine does dial a loopback registry when asked to pull from it."""
    with pytest.raises(derrors.APIError):
        docker.from_env().api.pull(f"127.0.0.1:{listener.port}/x", tag="latest")
    assert listener.accepted >= 1


def test_a_reference_that_reaches_the_agent_directly_makes_no_connection(make_executor, plane, listener, monkeypatch):  # noqa: F811
    monkeypatch.setattr(imageref, "resolver", lambda host: {"registry.example": ["127.0.0.1"]}[host])
    ex = make_executor(images=ImagePolicy())
    refs = [
        f"127.0.0.1:{listener.port}/x",
        f"localhost:{listener.port}/x",
        f"registry.example:{listener.port}/x",  # a name that resolves to loopback
        "10.20.30.40:5000/x",  # a private range
        "192.168.1.2/x:1",
    ]
    for i, ref in enumerate(refs, start=1):
        ex.handle_assignment(assignment(i, ["true"], image=ref, node_trust="platform"))
    for i in range(1, len(refs) + 1):
        ended = wait_for(lambda i=i: plane.ended(i), "the ended report")
        assert ended["reason"] == "image_pull_failed"
        assert ended["message"].startswith("image refused by policy: the registry ")
        assert [r["state"] for r in plane.reports[i]] == ["ended"]
    assert listener.accepted == 0


def test_an_absent_image_fails_with_fixed_text_never_the_engines(docker_engine, tmp_path):
    store = ImageStore(docker.from_env().api, tmp_path)
    with pytest.raises(RunnerError) as err:
        store.ensure(f"euler-test/absent-{uuid.uuid4().hex[:6]}:1")
    assert err.value.reason == "image_pull_failed"
    # Here no registry resolves: refused by the address policy, which does not tell "no such name" from "a
    # private one" (the lender's own DNS is no oracle either).
    assert err.value.message in (images.NOT_FOUND, images.UNREACHABLE, images.TIMED_OUT, images.TEXTS["refused"])
    assert "registry-1.docker.io" not in err.value.message and "dial" not in err.value.message


def test_the_lenders_allowed_images_are_enforced_on_the_node(docker_engine, tmp_path):
    store = ImageStore(docker.from_env().api, tmp_path, ImagePolicy(patterns=("ghcr.io/org/*",)))
    with pytest.raises(RunnerError) as err:
        store.ensure(IMAGE, trust="platform")
    assert err.value.message == images.REFUSED.format(why=images.NOT_ALLOWED)


def test_on_a_community_node_a_local_image_euler_did_not_pull_does_not_run(make_executor, plane):  # noqa: F811
    ex = make_executor(images=ImagePolicy())
    ex.handle_assignment(assignment(11, ["echo", "hi"], node_trust="community"))
    ended = wait_for(lambda: plane.ended(11), "the ended report")
    assert ended["reason"] == "image_pull_failed" and ended["message"].startswith(images.NOT_LOCAL)
    ex.handle_assignment(assignment(12, ["echo", "hi"], node_trust="platform"))  # the operator's own node
    assert wait_for(lambda: plane.ended(12), "the ended report")["reason"] == "exited"


def test_a_community_node_runs_local_images_when_its_lender_allows_or_euler_pulled_them(make_executor, plane):  # noqa: F811
    ex = make_executor(images=ImagePolicy(local_images=True))
    ex.handle_assignment(assignment(21, ["echo", "hi"], node_trust="community"))
    assert wait_for(lambda: plane.ended(21), "the ended report")["reason"] == "exited"
    ex = make_executor(images=ImagePolicy())
    image_id = docker.from_env().api.inspect_image(IMAGE)["Id"]
    ex.images._note(image_id, ref=IMAGE, size=0)  # as a pull records it (nothing can be pulled in CI)
    ex.handle_assignment(assignment(22, ["echo", "hi"], node_trust="community"))
    assert wait_for(lambda: plane.ended(22), "the ended report")["reason"] == "exited"
    ex.images._forget(image_id)


# --- the cache cap ----------------------------------------------------------------------------------------
def tiny_image(api, tag: str, size: int) -> str:
    """`docker import` of a tarball holding one file of `size` random bytes: a distinct image id."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        data = uuid.uuid4().bytes * (size // 16 + 1)
        info = tarfile.TarInfo("blob")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    api.import_image_from_data(raw.getvalue(), repository=tag.split(":")[0], tag=tag.split(":")[1])
    return api.inspect_image(tag)["Id"]


@pytest.fixture
def tiny(docker_engine):
    api = docker.from_env().api
    repo = f"euler-test/cache-{uuid.uuid4().hex[:8]}"
    made: list[str] = []

    def make(n: int, size: int = 64 * 1024) -> tuple[str, str]:
        tag = f"{repo}:{n}"
        made.append(tag)
        return tag, tiny_image(api, tag, size)

    yield api, make
    for tag in made:
        try:
            api.remove_image(tag, force=True)
        except derrors.APIError:
            pass


def test_the_cache_is_pruned_least_recently_used_first_never_an_image_in_use(tiny, tmp_path):
    api, make = tiny
    store = ImageStore(api, tmp_path, ImagePolicy(cache_bytes=200 * 1024))
    images_ = [make(n) for n in range(4)]
    for tag, image_id in images_:
        store._note(image_id, ref=tag, size=api.inspect_image(image_id)["Size"])
    oldest_tag, oldest = images_[0]
    container = api.create_container(oldest_tag, command=["/blob"])["Id"]  # a job's container holds its image
    try:
        store.touch(images_[2][1])  # used again: newest
        removed = store.prune()
    finally:
        api.remove_container(container, force=True)
    assert removed == [images_[1][1]]  # over the cap by one image: the least recently used one not in use
    assert set(store.pulled()) == {oldest, images_[2][1], images_[3][1]}
    with pytest.raises(derrors.ImageNotFound):
        api.inspect_image(images_[1][0])
    store.policy = ImagePolicy(cache_bytes=100 * 1024)  # the lender lowers the cap: two more must go
    assert store.prune() == [oldest, images_[3][1]]  # the oldest is no longer in use: first to go


def test_an_image_the_lender_keeps_under_its_own_tag_only_loses_eulers_tag(tiny, tmp_path):
    api, make = tiny
    tag, image_id = make(9)
    lender_tag = tag.rsplit(":", 1)[0] + ":lenders"
    api.tag(image_id, tag.rsplit(":", 1)[0], "lenders")
    store = ImageStore(api, tmp_path, ImagePolicy(cache_bytes=0))
    store._note(image_id, ref=tag, size=1)
    assert store.prune() == [image_id]
    assert api.inspect_image(lender_tag)["Id"] == image_id
    api.remove_image(lender_tag)
