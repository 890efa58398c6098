"""euler_client.jsoncodec: what json.loads and json.dumps give, without importing the json package on the way."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from euler_client import jsoncodec

CLIENT = Path(__file__).resolve().parents[2] / "client"

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


def test_the_run_paths_modules_import_neither_json_nor_re():
    """`euler run`'s own modules, imported as the command imports them: no json, no re (their start-up cost)."""
    probe = (
        "import sys; import euler_client.cli, euler_client.cli.runargs, euler_client.cli.attach,"
        " euler_client.client, euler_client.config, euler_client.wire, euler_client.jobs;"
        " print(sorted({'json', 're', 'enum'} & set(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=CLIENT, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
