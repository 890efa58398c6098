"""Fixtures for multi-process end-to-end tests: `platform_factory` / `platform` (see harness.py)."""

from __future__ import annotations

import re

import pytest

from tests.e2e.harness import REPO, Platform


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


@pytest.fixture
def platform_factory(request, transactional_db, tmp_path):
    """Make (and start) platforms; all are stopped at teardown, their logs kept when the test fails. Compact (one
    worker with beat inside) unless a test asks for topology="full" (harness.py)."""
    made: list[Platform] = []

    def make(*, env: dict | None = None, start: bool = True, topology: str = "compact", **start_kwargs) -> Platform:
        platform = Platform(tmp_path / f"platform{len(made)}", env=env, topology=topology)
        made.append(platform)
        if start:
            platform.start(**start_kwargs)
        return platform

    yield make
    failed = any(getattr(getattr(request.node, f"rep_{w}", None), "failed", False) for w in ("setup", "call"))
    for i, platform in enumerate(made):
        try:
            if failed:
                dest = REPO / "var" / "test-artifacts" / re.sub(r"[^\w.-]", "_", request.node.nodeid) / f"platform{i}"
                platform.collect(dest)
                print(f"\nprocess logs kept in {dest}\n{platform.tails()}")
        finally:
            platform.stop()


@pytest.fixture
def platform(platform_factory) -> Platform:
    """A started platform (web, worker, beat) with default settings."""
    return platform_factory()
