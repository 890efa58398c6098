"""The pure rules of checkpoints: the declaration, a manifest's limits and names, the quota on new blobs, and
retention."""

from __future__ import annotations

import hashlib

import pytest

from euler.errors import InvalidInput
from jobs.checkpoints import rules
from nodeagent import protocol_checkpoints as pc


def f(path: str, size: int = 1, sha: str | None = None) -> pc.CheckpointFile:
    return pc.CheckpointFile(path=path, size=size, sha256=sha or hashlib.sha256(path.encode()).hexdigest())


def test_a_declaration_gets_its_defaults():
    assert rules.spec({"path": "/ckpt/"}) == {"path": "/ckpt", "interval_seconds": 300, "keep_last": 2}
    assert rules.spec(None) is None


@pytest.mark.parametrize(
    "value",
    [
        "/ckpt",
        {"path": "ckpt"},
        {"path": "/"},
        {"path": "/a/../b"},
        {"path": "/ckpt", "interval_seconds": 1},
        {"path": "/ckpt", "interval_seconds": True},
        {"path": "/ckpt", "interval_seconds": 10**9},
        {"path": "/ckpt", "keep_last": 0},
        {"path": "/ckpt", "keep_last": 1000},
        {"path": "/ckpt", "every": 5},
        {"interval_seconds": 5},
    ],
)
def test_a_bad_declaration_is_refused_with_one_code(value):
    with pytest.raises(InvalidInput) as err:
        rules.spec(value)
    assert err.value.code == "invalid_checkpoint"


def test_a_manifest_over_the_shared_file_limit_is_refused():
    files = [f(f"f{i}", 0) for i in range(pc.MAX_CHECKPOINT_FILES + 1)]
    refusal = rules.check_manifest(files, held=set(), quota_left=10**18)
    assert refusal.code == "checkpoint_too_many_files"


def test_a_manifest_over_the_shared_byte_limit_is_refused():
    refusal = rules.check_manifest([f("a", pc.MAX_CHECKPOINT_BYTES + 1)], held=set(), quota_left=10**18)
    assert refusal.code == "checkpoint_too_large"


@pytest.mark.parametrize("names", [["../x"], ["a", "a"], ["a", "a/b"], ["/abs"], ["a//b"]])
def test_bad_or_clashing_names_are_refused(names):
    refusal = rules.check_manifest([f(n) for n in names], held=set(), quota_left=10**18)
    assert refusal.code == "checkpoint_bad_name"


def test_the_quota_charges_only_blobs_not_held_each_at_least_the_minimum():
    a, b = f("a", 10), f("b", 10_000)
    assert rules.check_manifest([a, b], held={a.sha256}, quota_left=10_000) is None
    assert rules.check_manifest([a, b], held=set(), quota_left=10_000 + 4095).code == "quota_exceeded"
    # Two paths of one content are one blob.
    twin = f("c", 10_000, sha=b.sha256)
    assert rules.check_manifest([b, twin], held=set(), quota_left=10_000) is None


def test_retention_keeps_the_newest_and_drops_blobs_no_kept_checkpoint_names():
    assert rules.to_delete([1, 2, 3, 4], keep_last=2) == [2, 1]
    assert rules.to_delete([1], keep_last=2) == []
    kept = [[{"sha256": "a"}, {"sha256": "b"}], [{"sha256": "b"}]]
    assert rules.unreferenced({1: "a", 2: "b", 3: "c"}, kept) == [3]
