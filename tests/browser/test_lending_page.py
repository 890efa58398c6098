"""My machines in headless Chromium: the lender's machine, its contributed-hours chart, and its terms form."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone
from playwright.sync_api import expect

from tests.browser.conftest import shot, sign_in
from tests.browser.test_console import UNLABELLED, olivia  # noqa: F401 - the fixture
from tests.lending.conftest import lent_node, make_job, running_attempt  # noqa: F401 - the fixtures

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_lender_sees_their_machine_its_chart_and_sets_terms(
    site,
    new_page,
    olivia,  # noqa: F811
    owner,
    project,
    lent_node,  # noqa: F811
    running_attempt,  # noqa: F811
):
    from jobs import attempts

    node = lent_node(owner, name="olivias-box", gpus=1)
    now = timezone.now()
    for days_ago, hours in ((6, 5), (4, 8), (3, 2), (1, 10), (0, 4)):
        a = running_attempt(project, node, seconds=hours * 3600 + days_ago * 86400, gpus=1)
        with transaction.atomic():
            attempts.end_attempt(
                a.pk, a.job_id, outcome="succeeded", reason="exited", now=now - timedelta(days=days_ago)
            )
    running_attempt(project, node)
    page = new_page()
    sign_in(page, site, "olivia", next_path="/lending/")
    expect(page.get_by_role("heading", name="My machines", exact=True)).to_be_visible()
    card = page.locator('[data-machine="olivias-box"]')
    expect(card).to_contain_text("Jobs running now")
    assert card.locator("figure.chart svg rect").count() >= 5
    card.locator("summary").click()
    assert page.evaluate(UNLABELLED) == []
    card.get_by_label("Longest job (hours)").fill("6")
    card.get_by_label("Availability windows, one per line (empty: always)").fill("weekdays 20:00-08:00")
    card.get_by_role("button", name="Save terms").click()
    expect(page.locator('[data-machine="olivias-box"] summary')).to_contain_text("set")
    shot(page, "my-machines")
    node.refresh_from_db()
    assert node.lender_terms["max_job_hours"] == 6.0
