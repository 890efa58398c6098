"""Fixtures for schedules and webhooks: a member's client beside the owner's (`api`)."""

from __future__ import annotations

import pytest


@pytest.fixture
def member_api(project, make_user, client_for):
    from quotas.models import Membership
    from quotas.services import apikey_create

    mia = make_user("mia")
    Membership.objects.create(project=project, user=mia, role="member")
    _, secret = apikey_create(project=project, label="mia", by=mia, role="member")
    return client_for(secret)


def job_body(**over) -> dict:
    body = {
        "name": "nightly",
        "image": "euler-test/busybox",
        "command": ["echo", "tick"],
        "cpu_milli": 100,
        "memory_bytes": 64 * 1024 * 1024,
        "timeout_seconds": 60,
    }
    body.update(over)
    return body


def schedule_body(**over) -> dict:
    body = {"name": "nightly", "cron": "* * * * *", "timezone": "UTC", "job": job_body()}
    body.update(over)
    return body
