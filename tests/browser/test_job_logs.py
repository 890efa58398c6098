"""A job submitted from the console form, its log lines arriving live over the websocket, then cancelled.

Runs the real platform (uvicorn web, Celery worker and beat, a `./euler-node` agent, Docker): pytest-django's
live server is WSGI and cannot serve websockets.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import PASSWORD, shot, sign_in
from tests.e2e.test_jobs import FAST, TRAP, Euler

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.docker]


def ticks(text: str) -> list[int]:
    return [int(n) for n in re.findall(r"tick-(\d+)", text)]


@pytest.fixture
def euler(platform_factory, project, docker_engine):
    # The web restart below must not make the node look lost: its heartbeats stop while the web is down, and under
    # xdist on 2 cores that restart once took 34 s, past the 30 s default (the node went offline, its attempt was
    # lost, and the cancelled attempt never existed). A window no restart comes near.
    quick = {k: v for k, v in FAST.items() if not k.startswith("EULER_NODE_OFFLINE")} | {
        "EULER_NODE_OFFLINE_AFTER": "180"
    }
    e = Euler(platform_factory(env=quick), project)
    yield e
    e.cleanup()


def test_a_job_from_the_form_streams_its_log_live_and_is_cancelled(euler, new_page, owner):
    from django.contrib.auth.hashers import PBKDF2PasswordHasher

    from jobs.models import Attempt, Job

    # The web process runs the production settings, whose hashers do not include the tests' fast MD5 one.
    hasher = PBKDF2PasswordHasher()
    owner.password = hasher.encode(PASSWORD, hasher.salt())
    owner.save(update_fields=["password"])
    euler.node()
    site = euler.platform.url
    page = new_page()
    sign_in(page, site, owner.username)
    page.goto(site + "/jobs/new/")
    page.get_by_label("Name", exact=True).fill("live-log")
    page.get_by_label("Image").fill("euler-test/busybox")
    script = (
        TRAP + "echo first-line; echo to-stderr >&2; i=0; while true; do i=$((i+1)); echo tick-$i; sleep 1; done & wait"
    )
    page.get_by_label("Command (shell-style words, no shell runs it)").fill(f"sh -c '{script}'")
    page.get_by_label("CPU cores").fill("0.25")
    page.get_by_label("Memory (MiB)").fill("64")
    page.get_by_label("Timeout (seconds)").fill("120")
    page.get_by_role("button", name="Submit job").click()
    page.wait_for_url(lambda url: "/jobs/new/" not in url)
    job = Job.objects.get(project=euler.project, name="live-log")

    log = page.locator("#log-view")
    expect(log.locator(".stdout", has_text="first-line")).to_be_visible(timeout=60_000)
    expect(log.locator(".stderr", has_text="to-stderr")).to_be_visible()
    expect(page.locator("#log-status")).to_have_text("live")
    expect(log).to_contain_text("tick-2")  # still arriving, without a reload
    expect(page.locator("#job-state")).to_contain_text("running")
    shot(page, "job-detail-live-log")

    # The web process restarts: the viewer reconnects and resumes after the last seq it showed.
    web = euler.platform.procs["web"]
    web.stop()
    expect(page.locator("#log-status")).to_have_text("reconnecting…")
    before = max(ticks(log.inner_text()))
    euler.platform.spawn("web", web.argv)
    euler.platform.wait_for(euler.platform._ready, "web answers again", timeout=60)
    expect(log).to_contain_text(f"tick-{before + 3}", timeout=60_000)
    expect(page.locator("#log-status")).to_have_text("live")
    seen = ticks(log.inner_text())
    assert seen == list(range(1, max(seen) + 1)), "every line once, in order, none lost across the reconnect"

    page.get_by_role("button", name="Pause").click()
    expect(page.locator("#log-status")).to_have_text("paused")
    page.get_by_role("button", name="Resume").click()

    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Cancel job").click()
    expect(page.locator("#job-state")).to_contain_text("cancelled")
    expect(page.get_by_role("button", name="Retry")).to_be_visible()
    job.refresh_from_db()
    assert job.state == "cancelled"
    euler.platform.wait_for(
        lambda: Attempt.objects.filter(job=job, state="cancelled").exists(), "the node stops the container"
    )
    shot(page, "job-detail-cancelled")

    page.goto(site + "/jobs/")
    expect(page.locator(f'tr[data-job="{job.pk}"] .state')).to_contain_text("cancelled")
    shot(page, "jobs-list")
