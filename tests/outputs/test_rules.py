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


@pytest.mark.parametrize("bad", ["", "/abs", "a/../b", "a//b", "./a", "a/", "a\x01b", "a\\b"])
def test_a_manifest_path_must_be_relative_and_plain(bad):
    assert rules.output_path(bad) is None


def test_the_plan_takes_files_in_order_while_they_fit_the_job_cap():
    d = rules.plan([f("a", 40), f("b", 70), f("c", 60)], job_cap=100, quota_left=10**9)
    assert [x.path for x in d.accepted] == ["a", "c"]
    assert [(x.path, x.reason) for x in d.refused] == [("b", "job_cap")]


def test_the_plan_refuses_what_passes_the_project_quota():
    d = rules.plan([f("a", 40), f("b", 30)], job_cap=1000, quota_left=50)
    assert [x.path for x in d.accepted] == ["a"]
    assert [(x.path, x.reason) for x in d.refused] == [("b", "quota")]


def test_the_plan_refuses_a_path_twice_and_a_bad_name():
    d = rules.plan([f("a", 1), f("a", 1), f("x/../y", 1)], job_cap=1000, quota_left=1000)
    assert [x.path for x in d.accepted] == ["a"]
    assert [x.reason for x in d.refused] == ["bad_name", "bad_name"]


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
