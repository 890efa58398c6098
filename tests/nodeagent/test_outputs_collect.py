"""Collection from real stopped containers written to break it: links, devices, FIFOs, bad names, many files,
a tar bomb, caps and missing paths. Each ends as a reason in the manifest, never as a file outside the spool."""

from __future__ import annotations

import hashlib
import os
import stat
import uuid

import docker
import pytest

from nodeagent import protocol
from nodeagent.outputs import collect as collect_mod
from nodeagent.outputs import rules
from nodeagent.outputs.collect import collect
from nodeagent.outputs.spool import OutputSpool

pytestmark = pytest.mark.docker

IMAGE = "euler-test/busybox"
LABEL = "euler.test.outputs"


@pytest.fixture
def ended(docker_engine):
    """Run a script in a throwaway container (default capabilities: it may mknod) and return it stopped."""
    client = docker.from_env()
    made = []

    def run(script: str):
        container = client.containers.run(
            IMAGE, ["sh", "-c", script], detach=True, labels={LABEL: "1"}, name=f"outputs-{uuid.uuid4().hex[:10]}"
        )
        made.append(container)
        result = container.wait(timeout=300)
        assert result["StatusCode"] == 0, container.logs().decode(errors="replace")
        return container

    yield run
    for container in made:
        container.remove(force=True)


@pytest.fixture
def spool(tmp_path):
    return OutputSpool(tmp_path / "outputs", cap=1 << 40)


def gather(container, paths, spool, *, max_bytes=1 << 30, attempt=1, **kw):
    spec = protocol.OutputSpec(paths=paths, max_bytes=max_bytes)
    attempt_spool = spool.attempt(attempt)
    collected = collect(container.client.api, container.id, spec, attempt_spool, **kw)
    return collected, attempt_spool


def content(attempt_spool, collected, path) -> bytes:
    return (attempt_spool.path / collected.spool_names[path]).read_bytes()


def skips(collected) -> dict[str, str]:
    return {s.path: s.reason for s in collected.manifest.skipped}


def test_a_tree_of_files_is_spooled_with_the_jobs_own_checksums(ended, spool):
    c = ended(
        "mkdir -p /out/logs && head -c 3000000 /dev/urandom > /out/model.bin && echo first > /out/logs/a.txt"
        " && touch /out/empty && sha256sum /out/model.bin > /sums"
    )
    collected, attempt_spool = gather(c, ["/out"], spool)
    files = {f.path: f for f in collected.manifest.files}
    assert set(files) == {"out/model.bin", "out/logs/a.txt", "out/empty"}
    model = content(attempt_spool, collected, "out/model.bin")
    assert files["out/model.bin"].size == len(model) == 3_000_000
    assert files["out/model.bin"].sha256 == hashlib.sha256(model).hexdigest()
    sums, _ = gather(c, ["/sums"], spool, attempt=2)  # the job's own sha256sum, read back the same way
    assert content(spool.attempt(2), sums, "sums").split()[0].decode() == files["out/model.bin"].sha256
    assert content(attempt_spool, collected, "out/logs/a.txt") == b"first\n"
    assert files["out/empty"].size == 0
    assert collected.manifest.skipped_total == 0
    # A declared subdirectory names its files from its own last part; a declared file is its own name.
    sub, _ = gather(c, ["/out/logs", "/out/model.bin"], spool, attempt=3)
    assert {f.path for f in sub.manifest.files} == {"logs/a.txt", "model.bin"}
    # Nothing but numbered private files in the spool.
    for entry in os.scandir(attempt_spool.path):
        assert entry.name.startswith("f") and stat.S_IMODE(entry.stat(follow_symlinks=False).st_mode) == 0o600
        assert entry.is_file(follow_symlinks=False)


def test_links_devices_fifos_and_names_that_are_not_utf8_are_refused_with_reasons(ended, spool, tmp_path):
    c = ended(
        "mkdir -p /out/sub && echo secret-of-the-image > /etc/image-secret && echo kept > /out/sub/ok"
        " && ln -s /etc/image-secret /out/link && ln -s / /out/root && ln /out/sub/ok /out/hard"
        " && mkfifo /out/fifo && mknod /out/null c 1 3 && mknod /out/disk b 7 0"
        " && echo x > \"/out/$(printf 'bad\\377name')\" && ln -s /etc /escape"
    )
    collected, attempt_spool = gather(c, ["/out", "/escape"], spool)
    kept = {f.path for f in collected.manifest.files}
    reasons = skips(collected)
    assert reasons["out/link"] == rules.SYMLINK and reasons["out/root"] == rules.SYMLINK
    assert reasons["escape"] == rules.SYMLINK  # a declared path that is a link is not followed either
    assert reasons["out/fifo"] == rules.SPECIAL
    assert reasons["out/null"] == rules.DEVICE and reasons["out/disk"] == rules.DEVICE
    assert reasons["out/bad\\xffname"] == rules.NOT_UTF8
    # The engine archives a hard-linked file once, then the link: one copy is kept, the link is refused.
    assert len(kept & {"out/hard", "out/sub/ok"}) == 1
    assert reasons.get("out/hard", reasons.get("out/sub/ok")) == rules.SYMLINK
    assert collected.manifest.skipped_total == len(collected.manifest.skipped) == 8
    spooled = b"".join(p.read_bytes() for p in attempt_spool.path.iterdir())
    assert b"secret-of-the-image" not in spooled
    assert sorted(os.listdir(tmp_path / "outputs")) == ["1"]


def test_a_missing_path_is_reported_and_the_others_are_still_collected(ended, spool):
    c = ended("mkdir /out && echo ok > /out/a")
    collected, _ = gather(c, ["/nowhere", "/out"], spool)
    assert skips(collected) == {"/nowhere": rules.MISSING}
    assert [f.path for f in collected.manifest.files] == ["out/a"]


def test_files_over_the_job_cap_are_skipped_whole_and_smaller_ones_still_fit(ended, spool):
    c = ended(
        "mkdir /out && head -c 600000 /dev/urandom > /out/a && head -c 600000 /dev/urandom > /out/b"
        " && head -c 1000 /dev/urandom > /out/c"
    )
    collected, attempt_spool = gather(c, ["/out"], spool, max_bytes=1_000_000)
    kept = {f.path: f.size for f in collected.manifest.files}
    assert sum(kept.values()) <= 1_000_000 and "out/c" in kept and len(kept) == 2
    assert list(skips(collected).values()) == [rules.JOB_CAP]
    assert sum(p.stat().st_size for p in attempt_spool.path.iterdir()) == sum(kept.values())


def test_the_nodes_spool_cap_is_shared_and_what_does_not_fit_says_spool_cap(ended, tmp_path):
    c = ended("mkdir /out && head -c 700000 /dev/urandom > /out/a && head -c 700000 /dev/urandom > /out/b")
    small = OutputSpool(tmp_path / "small", cap=1_000_000)
    collected, first = gather(c, ["/out"], small)
    assert len(collected.manifest.files) == 1 and list(skips(collected).values()) == [rules.SPOOL_CAP]
    other, _ = gather(c, ["/out"], small, attempt=2)  # another attempt while the first still holds its bytes
    assert other.manifest.files == [] and set(skips(other).values()) == {rules.SPOOL_CAP}
    first.remove()
    again, _ = gather(c, ["/out"], small, attempt=3)
    assert len(again.manifest.files) == 1


def test_a_tar_bomb_is_not_read_past_the_cap(ended, spool):
    # A sparse file of a terabyte costs the job nothing, but the engine's archive of it is a terabyte of zeros.
    c = ended("mkdir /out && echo small > /out/a && truncate -s 1099511627776 /out/bomb && echo after > /out/z")
    collected, _ = gather(c, ["/out"], spool, max_bytes=10_000_000)
    assert [f.path for f in collected.manifest.files] == ["out/a"]
    assert skips(collected)["out/bomb"] == rules.JOB_CAP
    stop = collected.manifest.skipped[-1]
    assert stop.path == "/out" and "not read" in stop.message


def test_many_tiny_files_stop_at_the_file_limit_and_the_rest_are_counted(ended, spool):
    c = ended(f"mkdir /out && cd /out && seq {protocol.MAX_OUTPUT_FILES + 500} | xargs touch")
    collected, _ = gather(c, ["/out"], spool)
    assert len(collected.manifest.files) == protocol.MAX_OUTPUT_FILES
    assert collected.manifest.skipped_total == 500
    assert set(skips(collected).values()) == {rules.TOO_MANY}


def test_a_tree_too_large_to_count_is_read_no_further_than_the_slack(ended, spool, monkeypatch):
    monkeypatch.setattr(collect_mod, "READ_SLACK_BYTES", 1_000_000)
    monkeypatch.setattr(protocol, "MAX_OUTPUT_FILES", 100)
    c = ended("mkdir /out && cd /out && seq 5000 | xargs touch")
    collected, _ = gather(c, ["/out"], spool, max_bytes=0)
    assert len(collected.manifest.files) == 100
    assert 100 < collected.manifest.skipped_total < 4900  # stopped long before the end: the rest not even counted
    assert "not read" in collected.manifest.skipped[-1].message


def test_collection_stops_at_its_deadline(ended, spool):
    c = ended("mkdir /out && echo a > /out/a")
    collected, _ = gather(c, ["/out"], spool, seconds=-1)
    assert collected.manifest.files == []
    assert "not read" in collected.manifest.skipped[-1].message
