"""JSON for the API's bodies through the interpreter's own C codec (`_json`), without the `json` package: importing
that one imports `re` and with it `enum` and `functools` (bench/cli.py prints its CPU beside `python -c pass`). The same scanner and encoder that `json.loads` and `json.dumps` use, so the same values
and the same errors: whatever the fast path does not take (bytes that are not UTF-8, a BOM, anything malformed,
an interpreter without `_json`) goes to `json` itself, which decodes it or raises its `JSONDecodeError`."""

from __future__ import annotations

try:
    from _json import encode_basestring_ascii, make_encoder, make_scanner
except ImportError:  # another interpreter: the json package does it all
    make_scanner = None

_SPACE = " \t\n\r"  # JSON's whitespace (json.decoder.WHITESPACE)


class _Context:
    """What the C scanner reads from json.JSONDecoder: its defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = float  # NaN, Infinity, -Infinity, as json.decoder's _CONSTANTS


_scan = make_scanner(_Context()) if make_scanner is not None else None


def _not_serializable(value: object) -> object:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def loads(data: bytes | str) -> object:
    """`json.loads(data)`."""
    if _scan is not None:
        try:
            text = data.decode() if isinstance(data, (bytes, bytearray)) else data
            value, end = _scan(text, len(text) - len(text.lstrip(_SPACE)))
            if not text[end:].strip(_SPACE):
                return value
        except (StopIteration, ValueError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
            pass
    import json

    return json.loads(data)


def dumps(value: object) -> str:
    """`json.dumps(value)`: ASCII, `", "` and `": "` between items, NaN allowed, circular references refused."""
    if _scan is None:
        import json

        return json.dumps(value)
    encode = make_encoder({}, _not_serializable, encode_basestring_ascii, None, ": ", ", ", False, False, True)
    return "".join(encode(value, 0))
