"""Headless Debian Chromium driven by Playwright (never a downloaded browser), and console helpers."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.conftest import IN_CI
from tests.e2e.conftest import platform_factory, pytest_runtest_makereport  # noqa: F401 - fixtures for the log test
from tests.quotas.test_oidc_login import oidc, provider  # noqa: F401 - a real OIDC provider process

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"
PASSWORD = "pw-for-tests"


@pytest.fixture(scope="module")
def browser():
    """Module-scoped: Playwright's sync API holds an event loop in this thread, which must not outlive these tests."""
    if not os.path.exists(CHROMIUM):
        if IN_CI:
            pytest.fail(f"CI=true but {CHROMIUM} is missing (apt-get install chromium)")
        pytest.skip(f"needs Debian's Chromium at {CHROMIUM}")
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=20_000)  # pages refresh themselves every few seconds

    # Playwright's sync API keeps an event loop in this thread while the tests' own ORM calls stay synchronous
    # (database teardown included), so Django's async-context guard is lifted while the browser is up.
    saved = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as pw:
            chromium = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            yield chromium
            chromium.close()
    finally:
        if saved is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = saved


@pytest.fixture
def new_page(browser):
    """Pages in fresh contexts (own cookies); English unless a locale is asked for."""
    contexts = []

    def make(locale: str = "en-US"):
        context = browser.new_context(locale=locale, viewport={"width": 1280, "height": 900})
        context.set_default_timeout(20_000)
        contexts.append(context)
        return context.new_page()

    yield make
    for context in contexts:
        context.close()


def shot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    safe = re.sub(r"[^\w.-]", "_", name)
    page.screenshot(path=str(SHOTS / f"{safe}.png"), full_page=True)


def sign_in(page, base_url: str, username: str, password: str = PASSWORD, *, next_path: str = "") -> None:
    page.goto(f"{base_url}/login/" + (f"?next={next_path}" if next_path else ""))
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(lambda url: "/login/" not in url)


@pytest.fixture
def site(live_server):
    """The console on pytest-django's live server (WSGI: everything but websockets)."""
    return live_server.url
