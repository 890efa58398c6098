"""euler_client.jsoncodec: what json.loads and json.dumps give (that `euler run` imports no json: test_packaging.py)."""

from __future__ import annotations

import json
import math

import pytest
from euler_client import jsoncodec

VALUES = [
    {"id": 12, "state": "succeeded", "exit_code": 0, "node": None, "ok": True, "gone": False},
    [1, -2, 3.5, 1e300, -0.0, 12345678901234567890, "", "é ✓ 𝄞", '\x00\x1f"\\/'],
    {"nested": {"list": [{"a": []}, {}], "text": "line\nnext\ttab"}},
    "plain",
    42,
    None,
]


@pytest.mark.parametrize("value", VALUES)
def test_dumps_and_loads_are_the_json_packages(value):
    assert jsoncodec.dumps(value) == json.dumps(value)
    text = json.dumps(value, ensure_ascii=False)
    assert jsoncodec.loads(text) == json.loads(text)
    assert jsoncodec.loads(text.encode()) == json.loads(text.encode())
    assert jsoncodec.loads(f" \n\t{text}\r\n ") == value


def test_constants_and_duplicate_keys_read_as_json_reads_them():
    assert math.isnan(jsoncodec.loads("NaN")) and jsoncodec.loads("[Infinity, -Infinity]") == [math.inf, -math.inf]
    assert jsoncodec.loads('{"a": 1, "a": 2}') == {"a": 2}
    assert jsoncodec.dumps([math.inf]) == "[Infinity]"


@pytest.mark.parametrize(
    "data",
    ["", "   ", "{", '{"a": }', "[1, 2] x", '"unterminated', '"tab\there"', b"\xff\xfe", "\ufeff{}", "{'a': 1}"],
)
def test_what_json_refuses_raises_jsons_error(data):
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(data)
    with pytest.raises(json.JSONDecodeError) as got:
        jsoncodec.loads(data)
    assert (got.value.msg, got.value.pos) == (expected.value.msg, expected.value.pos)


def test_bytes_json_can_read_are_read_as_json_reads_them():
    assert jsoncodec.loads('{"a": "é"}'.encode("utf-16")) == {"a": "é"}
    assert jsoncodec.loads(b"\xef\xbb\xbf[1]") == [1]


def test_what_json_cannot_write_raises_its_error():
    with pytest.raises(TypeError, match="Object of type set is not JSON serializable"):
        jsoncodec.dumps({"a": {1}})
    loop: list = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular reference"):
        jsoncodec.dumps(loop)
