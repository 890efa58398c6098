"""Presenting answers: JSON for scripts, rich tables for people (rich is imported only when a table is drawn)."""

from __future__ import annotations

import sys


def emit_json(data: object) -> None:
    import json

    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


def note(message: str) -> None:
    """Talk goes to stderr, so stdout stays the data."""
    sys.stderr.write(f"euler: {message}\n")
    sys.stderr.flush()


def table(columns: list[str], rows: list[list[object]], *, title: str | None = None) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=title, box=None, header_style="bold", pad_edge=False, title_justify="left")
    for column in columns:
        t.add_column(column, overflow="fold")
    for row in rows:
        t.add_row(*("" if cell is None else str(cell) for cell in row))
    Console(soft_wrap=False).print(t)


def fields(pairs: list[tuple[str, object]]) -> None:
    width = max(len(k) for k, _ in pairs)
    for key, value in pairs:
        sys.stdout.write(f"{key.ljust(width)}  {'' if value is None else value}\n")


def fmt_bytes(n: object) -> str:
    if not isinstance(n, (int, float)):
        return ""
    for unit, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if n >= size:
            value = n / size
            return f"{value:.0f}{unit}" if value == int(value) else f"{value:.1f}{unit}"
    return f"{int(n)}B"


def fmt_cpu(milli: object) -> str:
    if not isinstance(milli, int):
        return ""
    return f"{milli // 1000}" if milli % 1000 == 0 else (f"{milli / 1000:g}" if milli % 100 == 0 else f"{milli}m")


def fmt_time(value: object) -> str:
    """`2026-11-30T10:24:12.123456Z` → `2026-11-30 10:24:12`."""
    if not isinstance(value, str):
        return ""
    return value.replace("T", " ")[:19]


def bar(used: float, limit: float, width: int = 24) -> str:
    if not limit:
        return "".ljust(width)
    filled = min(width, round(width * used / limit))
    return "█" * filled + "░" * (width - filled)
