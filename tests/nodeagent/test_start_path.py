"""The start path kept short without losing a check: images checked once while the engine's image events say
nothing changed, and the egress rules verified beside the engine's create, before every networked start."""

from __future__ import annotations

import queue
import threading
import uuid

import docker
import pytest

from nodeagent.docker_runner import DockerRunner
from nodeagent.executor_start import beside
from nodeagent.imagecache import ImageCache
from nodeagent.offer import NetworkPolicy

from .test_egress import PORT, _sh, fake_net  # noqa: F401
from .test_egress_fresh import _egress
from .test_executor import IMAGE, assignment, make_executor, node, plane, wait_for  # noqa: F401, F811


class _Stream:
    """An engine event stream fed by the test; `end()` ends it as an engine restart would."""

    def __init__(self):
        self.items: queue.Queue = queue.Queue()

    def __iter__(self):
        while True:
            item = self.items.get()
            if item is None:
                return
            yield item

    def end(self):
        self.items.put(None)

    def close(self):
        self.end()


class _EventsApi:
    def __init__(self):
        self.streams: queue.Queue = queue.Queue()
        self.opened = threading.Semaphore(0)

    def events(self, **kw):
        assert kw["filters"] == {"type": ["image"]}
        stream = self.streams.get()
        self.opened.release()
        return stream


def _connected(cache: ImageCache, api: _EventsApi, stream: _Stream) -> None:
    api.streams.put(stream)
    cache.start()
    assert api.opened.acquire(timeout=10)
    wait_for(lambda: cache.get("probe", "") is None and cache._connected, "the stream connected")


def test_an_image_checked_while_the_stream_is_connected_is_kept_until_an_image_event_or_the_streams_end():
    api, first = _EventsApi(), _Stream()
    cache = ImageCache(api)
    assert cache.generation() == 0
    cache.put("alpine:3.20", "platform", ("sha256:a", False), cache.generation())
    assert cache.get("alpine:3.20", "platform") is None  # not connected yet: nothing is kept
    _connected(cache, api, first)
    cache.put("alpine:3.20", "platform", ("sha256:a", False), cache.generation())
    assert cache.get("alpine:3.20", "platform") == ("sha256:a", False)
    assert cache.get("alpine:3.20", "community") is None  # the trust is part of the key
    began = cache.generation()
    first.items.put({"Type": "image", "Action": "untag"})
    wait_for(lambda: cache.get("alpine:3.20", "platform") is None, "the event empties it")
    cache.put("alpine:3.20", "platform", ("sha256:a", False), began)  # a check begun before the event is not kept
    assert cache.get("alpine:3.20", "platform") is None
    cache.put("alpine:3.20", "platform", ("sha256:a", False), cache.generation())
    second = _Stream()
    api.streams.put(second)
    first.end()  # the engine restarted: nothing is known until the stream is back, and then nothing is kept
    assert api.opened.acquire(timeout=10)
    wait_for(lambda: cache._connected, "the stream back")
    assert cache.get("alpine:3.20", "platform") is None
    cache.stop()
    assert cache.get("alpine:3.20", "platform") is None


def test_a_check_beside_answers_when_waited_for_and_one_that_raises_is_a_refusal():
    gate = threading.Event()

    def slow():
        gate.wait(10)
        return None

    wait = beside(slow, name="t")
    gate.set()
    assert wait() is None and wait() is None

    def broken():
        raise OSError("iptables: not found")

    assert "a check before its start failed (iptables: not found)" in beside(broken, name="t")()


# --- the real engine -----------------------------------------------------------------------------------------
@pytest.mark.docker
def test_the_executor_checks_an_image_once_and_again_after_an_image_event(make_executor, plane):  # noqa: F811
    ex = make_executor()
    checks = []
    check = ex.images.ensure
    ex.images.ensure = lambda image, trust="": checks.append(image) or check(image, trust=trust)
    ex.image_cache.start()
    wait_for(lambda: ex.image_cache._connected, "the image event stream")
    ex.handle_assignment(assignment(61, ["true"]))
    wait_for(lambda: plane.ended(61), "the first job's end")
    assert checks == [IMAGE]
    kept, generation = ex.image_cache.get(IMAGE, ""), ex.image_cache.generation()
    ex.handle_assignment(assignment(62, ["true"]))
    assert wait_for(lambda: plane.ended(62), "the second job's end")["reason"] == "exited"
    # Not checked again, unless the shared engine reported an image event meanwhile (another test's tag).
    assert checks == [IMAGE] or not kept or ex.image_cache.generation() != generation
    tag = f"start-{uuid.uuid4().hex[:8]}"
    client = docker.from_env()
    client.api.tag(IMAGE, "euler-test/busybox", tag)  # an image event: whatever was checked is checked again
    try:
        wait_for(lambda: ex.image_cache.get(IMAGE, "") is None, "the tag event empties the cache")
        before = len(checks)
        ex.handle_assignment(assignment(63, ["true"]))
        assert wait_for(lambda: plane.ended(63), "the third job's end")["reason"] == "exited"
        assert len(checks) == before + 1
    finally:
        client.api.remove_image(f"euler-test/busybox:{tag}")


@pytest.mark.docker
def test_an_image_removed_behind_the_cache_is_checked_afresh_and_refused_by_policy(make_executor, plane):  # noqa: F811
    ex = make_executor()
    ex.image_cache.start()
    wait_for(lambda: ex.image_cache._connected, "the image event stream")
    client = docker.from_env()
    image = f"127.0.0.1:5999/euler-stale:{uuid.uuid4().hex[:8]}"  # an IP literal registry: never pulled from
    repo, tag = image.rsplit(":", 1)
    before = ex.image_cache.generation()
    client.api.tag(IMAGE, repo, tag)
    image_id = client.api.inspect_image(image)["Id"]
    client.api.remove_image(image)
    wait_for(lambda: ex.image_cache.generation() >= before + 2, "the tag and untag events seen")
    ex.image_cache.put(image, "", (image_id, False), ex.image_cache.generation())  # as if its event had not come yet
    ex.handle_assignment(assignment(66, ["true"], image=image))
    ended = wait_for(lambda: plane.ended(66), "the end")
    assert ended["reason"] == "image_pull_failed" and ended["message"].startswith("image refused by policy")
    assert not any(r["state"] == "running" for r in plane.reports[66])
    assert ex.image_cache.get(image, "") is None


class _SlowEgress:
    """Rules that turn out missing, found so only after the container was created: it must never start."""

    network_name = None

    def __init__(self, node_name: str):
        self.node = node_name
        self.ready = threading.Event()
        self.ready.set()
        self.seen: list[str] = []

    def refuse_reason(self):
        found = wait_for(lambda: DockerRunner().find_attempt(node_name=self.node, attempt_id=64), "the create")
        self.seen.append(found.status)
        return "this node refuses networked jobs: egress rules could not be installed: iptables: gone"

    def status(self):
        return "public", ""


@pytest.mark.docker
def test_the_egress_check_runs_beside_the_create_and_a_refusal_never_starts_the_container(make_executor, plane, node):  # noqa: F811
    egress = _SlowEgress(node)
    ex = make_executor(egress=egress)
    ex.handle_assignment(assignment(64, ["echo", "out"]))
    ended = wait_for(lambda: plane.ended(64), "the refused job's end")
    assert egress.seen == ["created"]  # checked while the engine had created it, before any start
    assert ended["reason"] == "start_failed" and "egress rules could not be installed" in ended["message"]
    assert not any(r["state"] == "running" for r in plane.reports[64]) and plane.log(64) == ""
    wait_for(lambda: DockerRunner().find_attempt(node_name=node, attempt_id=64) is None, "the container removed")


@pytest.mark.docker
def test_rules_flushed_and_the_job_network_removed_with_the_engine_watched_never_let_a_job_out(
    fake_net,  # noqa: F811
    node,  # noqa: F811
    tmp_path,
    make_executor,  # noqa: F811
    plane,  # noqa: F811
):
    """What an engine restart does to the agent's rules (flushed, the network gone), done to the chain and the
    network this agent owns (restarting the shared engine would stop other tests' containers): the engine's
    event path puts them back, and a job assigned at once cannot get out meanwhile."""
    private = fake_net.add("private", "10.213.79.10", "10.213.79.1")
    egress = _egress(node, tmp_path, NetworkPolicy())
    watcher = threading.Thread(target=egress.watch_engine, daemon=True)
    watcher.start()
    try:
        ex = make_executor(egress=egress)
        _sh("iptables", "-w", "-F", egress.names.forward)
        _sh("iptables", "-w", "-D", "DOCKER-USER", "-i", egress.names.bridge, "-j", egress.names.forward)
        docker.from_env().networks.get(egress.network_name).remove()  # the engine's `destroy` event
        ex.handle_assignment(assignment(65, ["sh", "-c", f"nc -w 2 10.213.79.10 {PORT} </dev/null || echo refused"]))
        ended = wait_for(lambda: plane.ended(65), "the ended report", timeout=90)
        assert ended["reason"] == "exited", ended
        assert "hello-private" not in plane.log(65) and private.read_text() == ""
        assert egress.reinstalled >= 1
        assert f"-j {egress.names.forward}" in _sh("iptables", "-w", "-S", "DOCKER-USER").stdout
    finally:
        egress.teardown()
        watcher.join(timeout=10)
