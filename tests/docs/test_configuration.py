"""docs/configuration.md names every environment variable the code reads, and is generated from
`euler/catalog.py` (the rule: docs follow code)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = (
    "config",
    "euler",
    "nodeagent",
    "nodes",
    "jobs",
    "agents",
    "quotas",
    "console",
    "audit",
    "gateway",
    "client",
    "services",
    "lending",
    "workflows",
)
READ = re.compile(r"""(?:env_[a-z]+|os\.environ\.get|os\.getenv|environ\[)\(?\s*["']([A-Z][A-Z0-9_]+)["']""")
# config/settings_test.py: the suite's own database name, data dir per process, and xdist's worker name
TEST_ONLY = {"EULER_TEST_DB_SUFFIX", "EULER_TEST_DATA_DIR", "EULER_TEST_DATA_DIR_OF", "PYTEST_XDIST_WORKER"}


def variables_read() -> set[str]:
    found = set()
    for package in SOURCES:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" not in path.parts:
                found.update(READ.findall(path.read_text(encoding="utf-8")))
    return found - TEST_ONLY


def test_the_scan_finds_the_well_known_variables():
    found = variables_read()
    assert {"DATABASE_URL", "REDIS_URL", "EULER_MAX_LOG_BYTES"} <= found


def test_every_variable_the_code_reads_is_in_the_catalog():
    from euler.catalog import SECTIONS

    declared = " ".join(s.names for _, settings in SECTIONS for s in settings)
    missing = sorted(v for v in variables_read() if not re.search(rf"\b{v}\b", declared))
    assert not missing, (
        f"add these to euler/catalog.toml, then run `python -m euler.catalog > docs/configuration.md`: {missing}"
    )


def test_the_configuration_page_is_generated_from_the_catalog():
    from euler.catalog import render

    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert page == render(), "docs/configuration.md is stale: run `python -m euler.catalog > docs/configuration.md`"
