"""The pure part of output collection: names, member kinds, caps, the outcome; and the spool's file safety."""

from __future__ import annotations

import io
import os
import stat
import tarfile

import pytest

from nodeagent import protocol
from nodeagent.outputs import rules
from nodeagent.outputs.inputs import InputFailed, tar_head, tar_tail
from nodeagent.outputs.spool import OutputSpool, SpoolError

SHA = "0" * 64


@pytest.mark.parametrize(
    ("raw", "base", "name"),
    [
        ("out/model.bin", "out", "out/model.bin"),
        ("out/logs/", "out", "out/logs"),
        ("logs/a.txt", "logs", "logs/a.txt"),
        ("out/café ☕.txt", "out", "out/café ☕.txt"),
    ],
)
def test_a_member_name_becomes_its_relative_path(raw, base, name):
    assert rules.relative_name(raw, base) == name


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("out/../etc/passwd", rules.BAD_NAME),
        ("/etc/passwd", rules.BAD_NAME),
        ("out//a", rules.BAD_NAME),
        ("out/./a", rules.BAD_NAME),
        ("", rules.BAD_NAME),
        ("etc/passwd", rules.BAD_NAME),  # outside the declared path's tree
        ("out/a\nb", rules.BAD_NAME),
        ("out/bad\udcff", rules.NOT_UTF8),  # tarfile's surrogateescape for the byte 0xff
        ("out/" + "a" * protocol.MAX_OUTPUT_PATH_CHARS, rules.BAD_NAME),
    ],
)
def test_a_hostile_name_is_refused_with_its_reason(raw, reason):
    with pytest.raises(rules.BadName) as caught:
        rules.relative_name(raw, "out")
    assert caught.value.reason == reason and caught.value.message


def test_the_declared_path_gives_the_first_part_and_never_the_root():
    assert rules.declared_base("/out") == "out"
    assert rules.declared_base("/out/logs/") == "logs"
    assert rules.declared_base("/a/../b") == "b"
    for root in ("//", "/..", "/./"):
        with pytest.raises(rules.BadName):
            rules.declared_base(root)


def test_printable_escapes_bytes_that_are_not_utf8_and_control_characters():
    assert rules.printable("out/bad\udcff") == "out/bad\\xff"
    assert rules.printable("out/a\nb") == "out/a\\nb"
    assert rules.printable("out/é") == "out/é"


def _member(kind: bytes, name: str = "out/x", **attrs) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    for key, value in attrs.items():
        setattr(info, key, value)
    return info


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        (tarfile.REGTYPE, "file"),
        (tarfile.AREGTYPE, "file"),
        (tarfile.DIRTYPE, "dir"),
        (tarfile.SYMTYPE, rules.SYMLINK),
        (tarfile.LNKTYPE, "hardlink"),
        (tarfile.CHRTYPE, rules.DEVICE),
        (tarfile.BLKTYPE, rules.DEVICE),
        (tarfile.FIFOTYPE, rules.SPECIAL),
    ],
)
def test_tar_members_are_classified_and_only_regular_files_are_kept(kind, expected):
    assert rules.member_kind(_member(kind)) == expected


def test_the_tally_keeps_whole_files_under_the_job_cap_and_a_smaller_one_after_a_refusal():
    tally = rules.Tally(job_cap=100)
    assert tally.refuse_file(60) is None
    tally.keep("out/a", 60, SHA)
    assert tally.refuse_file(50)[0] == rules.JOB_CAP
    assert tally.refuse_file(40) is None
    tally.keep("out/b", 40, SHA)
    assert tally.refuse_file(1)[0] == rules.JOB_CAP
    assert tally.refuse_file(0) is None  # an empty file always fits


def test_the_tally_stops_at_the_file_count_and_lists_a_bounded_number_of_skips(monkeypatch):
    monkeypatch.setattr(protocol, "MAX_OUTPUT_FILES", 3)
    tally = rules.Tally(job_cap=10**9)
    for i in range(3):
        tally.keep(f"out/{i}", 1, SHA)
    assert tally.refuse_file(1)[0] == rules.TOO_MANY
    for i in range(protocol.MAX_OUTPUT_SKIPPED_LISTED + 10):
        tally.skip(f"out/s{i}", rules.TOO_MANY)
    manifest = tally.manifest()
    assert len(manifest.skipped) == protocol.MAX_OUTPUT_SKIPPED_LISTED
    assert manifest.skipped_total == protocol.MAX_OUTPUT_SKIPPED_LISTED + 10
    assert len(manifest.files) == 3


def test_the_outcome_says_complete_truncated_or_failed():
    files = [protocol.OutputFile(path="out/a", size=1, sha256=SHA)]
    whole = protocol.OutputManifest(files=files)
    assert rules.outcome(whole, refused=0, failed=[])[0] == "complete"
    assert rules.outcome(whole, refused=1, failed=[])[0] == "truncated"
    assert rules.outcome(whole, refused=0, failed=["out/a: 400"]) == ("failed", "upload failed: out/a: 400")
    skipped = protocol.OutputManifest(files=files, skipped_total=1, skipped=[{"path": "out/l", "reason": "symlink"}])
    outputs, message = rules.outcome(skipped, refused=0, failed=[])
    assert outputs == "truncated" and "symlink" in message
    broken = protocol.OutputManifest(error="collecting the outputs failed: engine gone")
    assert rules.outcome(broken, refused=0, failed=[]) == ("failed", broken.error)


def test_the_spool_is_private_numbered_and_counts_its_bytes(tmp_path):
    spool = OutputSpool(tmp_path / "outputs", cap=100)
    assert stat.S_IMODE(os.stat(tmp_path / "outputs").st_mode) == 0o700
    one = spool.attempt(7).open()
    assert stat.S_IMODE(os.stat(one.path).st_mode) == 0o700
    assert one.reserve(60) and not one.reserve(50)
    two = spool.attempt(8).open()
    assert not two.reserve(41) and two.reserve(40)
    name, fd = one.new_file()
    os.close(fd)
    assert name == "f000001" and stat.S_IMODE(os.stat(one.path / name).st_mode) == 0o600
    one.remove()
    assert not one.path.exists() and spool.budget.used == 40
    spool.clear()
    assert not two.path.exists()


def test_the_spool_refuses_a_root_that_is_a_link(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "outputs").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(SpoolError):
        OutputSpool(tmp_path / "outputs")


def test_a_link_planted_where_a_spool_file_goes_is_not_followed(tmp_path):
    spool = OutputSpool(tmp_path / "outputs").attempt(1).open()
    target = tmp_path / "target"
    target.write_text("host file")
    (spool.path / "f000001").symlink_to(target)
    with pytest.raises(FileExistsError):
        spool.new_file()
    assert target.read_text() == "host file"


def test_an_input_tar_makes_the_parents_and_the_file():
    data = b"model bytes"
    archive = tar_head("/in/models/m.bin", len(data)) + data + tar_tail(len(data))
    members = tarfile.open(fileobj=io.BytesIO(archive)).getmembers()
    assert [(m.name, m.isdir()) for m in members] == [("in", True), ("in/models", True), ("in/models/m.bin", False)]
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        assert tar.extractfile("in/models/m.bin").read() == data
    with pytest.raises(InputFailed):
        tar_head("/", 1)
