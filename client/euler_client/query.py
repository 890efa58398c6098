"""`query({"a": 1, "b": "x y"})` → `a=1&b=x%20y`: urllib.parse's urlencode without its import (~5 ms)."""

from __future__ import annotations

_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def quote(text: object) -> str:
    return "".join(chr(b) if b in _SAFE else f"%{b:02X}" for b in str(text).encode())


def query(params: dict) -> str:
    return "&".join(f"{quote(k)}={quote(v)}" for k, v in params.items() if v is not None)
