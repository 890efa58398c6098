"""Turning API validation into per-field messages for console forms (pure helpers)."""

from __future__ import annotations

from collections.abc import Mapping


def serializer_errors(errors) -> dict[str, str]:
    """DRF serializer.errors → {field: first message}; nested items name their parent field."""
    out: dict[str, str] = {}
    if not isinstance(errors, Mapping):
        return {"form": _first(errors)}
    for field, detail in errors.items():
        key = "form" if field == "non_field_errors" else field
        out[key] = _first(detail)
    return out


def _first(detail) -> str:
    if isinstance(detail, Mapping):
        for key, value in detail.items():
            return f"{key}: {_first(value)}"
        return ""
    if isinstance(detail, list | tuple):
        for item in detail:
            text = _first(item)
            if text:
                return text
        return ""
    return str(detail)


def field_for_code(code: str, mapping: Mapping[str, str]) -> str:
    """Which form field a service error code belongs to ("form" when none)."""
    return mapping.get(code, "form")


def lines(text: str) -> list[str]:
    return [line.strip() for line in (text or "").splitlines() if line.strip()]


def key_values(text: str) -> tuple[dict[str, str], str | None]:
    """KEY=VALUE lines → dict; the second value names the first line that is not KEY=VALUE."""
    out: dict[str, str] = {}
    for line in (text or "").splitlines():
        if not line.strip():
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            return out, line.strip()[:60]
        out[key.strip()] = value
    return out, None
