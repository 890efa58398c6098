"""Every setting Euler reads from the environment, with its default and meaning (the table is euler/catalog.toml):
the one source that `docs/configuration.md` is generated from (`python -m euler.catalog > docs/configuration.md`); a test checks
that the file is current and that every variable the code reads is here."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import NamedTuple


class Setting(NamedTuple):
    names: str  # as shown: `A`, or `A` / `B` for a pair set together
    default: str
    meaning: str


def _load() -> tuple[tuple[str, tuple[Setting, ...]], ...]:
    with open(Path(__file__).with_name("catalog.toml"), "rb") as f:
        data = tomllib.load(f)
    return tuple(
        (section["title"], tuple(Setting(**setting) for setting in section["setting"])) for section in data["section"]
    )


# (section title, its settings), in the order the page shows them.
SECTIONS: tuple[tuple[str, tuple[Setting, ...]], ...] = _load()


INTRO = """# Configuration

Generated from `euler/catalog.toml` by `python -m euler.catalog > docs/configuration.md`; do not edit by hand
(`tests/docs/test_configuration.py` fails when this page and the code drift).

Everything is read from the environment; a bad value stops the process with a message naming the
variable. Every secret also accepts `NAME_FILE` (a path to a file holding it).
"""


def render() -> str:
    """The configuration page, one table per section."""
    parts = [INTRO]
    for title, settings in SECTIONS:
        parts.append(f"\n## {title}\n\n| variable | default | meaning |\n|---|---|---|\n")
        parts.extend(f"| {s.names} | {s.default} | {s.meaning} |\n" for s in settings)
    return "".join(parts)


if __name__ == "__main__":
    import sys

    sys.stdout.write(render())
