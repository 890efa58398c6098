"""The pure rules of outputs: submission shapes, manifest paths, the plan's cap and quota, byte ranges."""

from __future__ import annotations

import pytest

from euler.errors import InvalidInput
from jobs.outputs import rules
from nodeagent import protocol

SHA = "0" * 64


def f(path: str, size: int) -> protocol.OutputFile:
    return protocol.OutputFile(path=path, size=size, sha256=SHA)


@pytest.mark.parametrize(
    "bad", ["out", "/", "/out/../etc", "/out/./x", "//out", "/out\x00", "/a\nb", 5, None, "/" + "a" * 1100]
)
def test_it_refuses_a_container_path_that_is_not_a_plain_absolute_path(bad):
    with pytest.raises(InvalidInput) as exc:
        rules.container_path(bad, what="path", code="invalid_outputs")
    assert exc.value.code == "invalid_outputs"


def test_it_keeps_an_absolute_path_and_drops_one_trailing_slash():
    assert rules.container_path("/out/", what="p", code="c") == "/out"
    assert rules.container_path("/out/logs", what="p", code="c") == "/out/logs"


def test_outputs_take_a_list_or_an_object_and_default_the_cap():
    assert rules.outputs(["/out"], default_bytes=10, max_bytes=100) == {"paths": ["/out"], "max_bytes": 10}
    assert rules.outputs({"paths": ["/a", "/b"], "max_bytes": 50}, default_bytes=10, max_bytes=100)["max_bytes"] == 50
    assert rules.outputs(None, default_bytes=10, max_bytes=100) is None


@pytest.mark.parametrize(
    "bad",
    [[], ["/a", "/a"], {"paths": ["/a"], "max_bytes": 101}, {"paths": ["/a"], "max_bytes": 0}, {"paths": ["/a"], "x": 1},
     {"paths": ["/a"], "max_bytes": True}, "/out", ["/a"] * 33],
)  # fmt: skip
def test_outputs_refuse_bad_shapes_and_caps(bad):
    with pytest.raises(InvalidInput) as exc:
        rules.outputs(bad, default_bytes=10, max_bytes=100)
    assert exc.value.code == "invalid_outputs"


def test_inputs_from_checks_each_input():
    good = [{"job": 3, "path": "out/model.bin", "to": "/in/model.bin"}]
    assert rules.inputs_from(good) == good
    for bad in (
        [{"job": 3, "path": "../x", "to": "/in/x"}],
        [{"job": 3, "path": "/out/x", "to": "/in/x"}],
        [{"job": 3, "path": "out/x", "to": "in/x"}],
        [{"job": "3", "path": "out/x", "to": "/in/x"}],
        [{"job": 3, "path": "out/x"}],
        [{"job": 3, "path": "a", "to": "/in/x"}, {"job": 4, "path": "b", "to": "/in/x"}],
        "nope",
    ):
        with pytest.raises(InvalidInput) as exc:
            rules.inputs_from(bad)
        assert exc.value.code == "invalid_inputs_from"


@pytest.mark.parametrize(
    "bad", ["", "/abs", "a/../b", "a//b", "./a", "a/", "a\x01b", "a\\b", "a\x85b", "a\x9bb", "a\ud800b"]
)
def test_a_manifest_path_must_be_relative_and_plain(bad):
    assert rules.output_path(bad) is None  # C1 controls and lone surrogates too: the agent refuses them (Cc, Cs)


MIN = rules.FILE_CHARGE_MIN_BYTES


def test_the_plan_takes_files_in_order_while_they_fit_the_job_cap():
    d = rules.plan([f("out/a", 40), f("out/b", 70), f("out/c", 60)], declared=["/out"], job_cap=100, quota_left=10**9)
    assert [x.path for x in d.accepted] == ["out/a", "out/c"]
    assert [(x.path, x.reason) for x in d.refused] == [("out/b", "job_cap")]


def test_the_plan_refuses_what_passes_the_project_quota():
    d = rules.plan([f("out/a", 5000), f("out/b", 30)], declared=["/out"], job_cap=10**6, quota_left=5000 + MIN - 1)
    assert [x.path for x in d.accepted] == ["out/a"]
    assert [(x.path, x.reason) for x in d.refused] == [("out/b", "quota")]  # 30 bytes count as MIN


def test_empty_files_count_the_minimum_charge_so_a_flood_of_them_meets_the_quota():
    files = [protocol.OutputFile(path=f"out/e{i}", size=0, sha256=SHA) for i in range(10)]
    d = rules.plan(files, declared=["/out"], job_cap=10**6, quota_left=3 * MIN)
    assert len(d.accepted) == 3 and {x.reason for x in d.refused} == {"quota"} and len(d.refused) == 7
    assert rules.charge(0) == rules.charge(MIN) == MIN and rules.charge(MIN + 1) == MIN + 1


def test_the_plan_refuses_a_path_twice_and_a_bad_name():
    d = rules.plan([f("out/a", 1), f("out/a", 1), f("out/x/../y", 1)], declared=["/out"], job_cap=MIN, quota_left=10**9)
    assert [x.path for x in d.accepted] == ["out/a"]
    assert [x.reason for x in d.refused] == ["bad_name", "bad_name"]


@pytest.mark.parametrize(
    "name", [".git/config", ".bashrc", ".ssh/authorized_keys", "outx/a", "ou/t", "model.bin", "logs2/a", "in/out/a"]
)
def test_a_name_outside_the_declared_paths_is_refused_whatever_its_shape(name):
    d = rules.plan([f(name, 10), f("out/ok", 10)], declared=["/out", "/data/logs"], job_cap=10**6, quota_left=10**9)
    assert [x.path for x in d.accepted] == ["out/ok"]
    ((refused),) = d.refused
    assert (refused.path, refused.reason) == (name, "bad_name") and "outside the declared outputs" in refused.message


def test_names_under_each_declared_paths_last_part_are_taken():
    files = [f("out/a", 1), f("logs/2024/b.txt", 1), f("model.pt", 1), f("out", 1)]
    d = rules.plan(files, declared=["/out", "/data/logs/", "/w/model.pt"], job_cap=10**6, quota_left=10**9)
    assert [x.path for x in d.accepted] == ["out/a", "logs/2024/b.txt", "model.pt"]
    assert [(x.path, x.message) for x in d.refused] == [("out", "a file and a directory of the same name")]


def test_a_file_under_another_files_name_is_refused():
    d = rules.plan([f("out/a", 1), f("out/a/b", 1)], declared=["/out"], job_cap=10**6, quota_left=10**9)
    assert [x.path for x in d.accepted] == ["out/a"] and [x.reason for x in d.refused] == ["bad_name"]


def test_a_refused_name_is_quoted_escaped():
    d = rules.plan([f("x\x1b[31m", 1)], declared=["/out"], job_cap=10**6, quota_left=10**9)
    assert d.refused[0].path == "x\\x1b[31m"


def test_content_range_of_a_chunk():
    assert rules.content_range("bytes 0-9/100") == (0, 9, 100)
    assert rules.content_range("bytes 90-99/100") == (90, 99, 100)
    for bad in (None, "", "bytes 5-4/100", "bytes 0-100/100", "bytes */100", "items 0-1/2", "bytes 0-1/2 "):
        assert rules.content_range(bad) is None


def test_byte_range_reads_one_range():
    assert rules.byte_range(None, 100) is None
    assert rules.byte_range("bytes=0-9", 100) == (0, 9)
    assert rules.byte_range("bytes=90-", 100) == (90, 99)
    assert rules.byte_range("bytes=90-1000", 100) == (90, 99)
    assert rules.byte_range("bytes=-10", 100) == (90, 99)
    assert rules.byte_range("bytes=-1000", 100) == (0, 99)
    assert rules.byte_range("bytes=0-1,5-6", 100) is None  # several ranges: the whole file
    assert rules.byte_range("bytes=9-3", 100) is None  # invalid: ignored


@pytest.mark.parametrize("header", ["bytes=100-", "bytes=200-300", "bytes=-0"])
def test_byte_range_past_the_end_is_unsatisfiable(header):
    with pytest.raises(rules.Unsatisfiable):
        rules.byte_range(header, 100)
