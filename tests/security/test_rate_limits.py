"""No token guessing at scale: every door that takes a secret answers 429 past EULER_AUTH_FAILURES_PER_MINUTE.

API keys on the DRF API and node enrollment/credentials already have tests (tests/quotas/test_auth_rate_limit.py,
tests/nodes/test_rate_limit.py); here: invitation links, the gateway, the websocket and the logs reader, which
take the same secrets through doors of their own.
"""

from __future__ import annotations

import random

import pytest
from channels.testing import WebsocketCommunicator
from django.test import Client

from euler.redis import client as redis

GUESS = "euler_pk_" + "G" * 43


@pytest.fixture
def limit(settings):
    settings.EULER_AUTH_FAILURES_PER_MINUTE = 3
    yield 3
    for key in redis().scan_iter(match="euler:rl:*"):
        redis().delete(key)


def an_address() -> str:
    """An address of its own per test, so that counters never mix between tests or runs."""
    return f"10.{random.randrange(256)}.{random.randrange(256)}.{random.randrange(1, 255)}"


@pytest.mark.django_db
def test_guessed_invitation_links_are_answered_429_past_the_limit(limit, project):
    from quotas.invitations import invitation_create

    real = invitation_create(project=project).token
    guesser = Client(REMOTE_ADDR=an_address())
    codes = [guesser.get(f"/join/euler_inv_{i:043d}").status_code for i in range(limit + 2)]
    assert codes == [404] * limit + [429, 429]
    limited = guesser.get(f"/join/{real}")
    assert limited.status_code == 429 and int(limited["Retry-After"]) >= 1
    assert limited["Cache-Control"].startswith("no-store") or "no-store" in limited["Cache-Control"]
    # Another address is not held back, and a valid link is never counted.
    other = Client(REMOTE_ADDR=an_address())
    assert all(other.get(f"/join/{real}").status_code == 200 for _ in range(limit + 2))


@pytest.mark.django_db(transaction=True)
def test_guessed_api_keys_on_the_gateway_are_answered_429_past_the_limit(limit, api_key):
    guesser = Client(REMOTE_ADDR=an_address(), HTTP_X_EULER_API_KEY=GUESS)
    codes = [guesser.get("/api/v1/agents/chat/invoke/x").status_code for _ in range(limit + 1)]
    assert codes == [401] * limit + [429]
    r = guesser.get("/api/v1/agents/chat/invoke/x")
    assert r.json()["code"] == "rate_limited" and int(r["Retry-After"]) >= 1


@pytest.mark.django_db(transaction=True)
async def test_guessed_api_keys_on_the_websocket_are_refused_past_the_limit(limit, project):
    from config.asgi import application
    from quotas.wsauth import CLOSE_RATE_LIMITED

    address = an_address()
    codes = []
    for _ in range(limit + 1):
        headers = [(b"origin", b"http://localhost"), (b"host", b"localhost"), (b"x-euler-api-key", GUESS.encode())]
        ws = WebsocketCommunicator(application, "/ws/jobs/1/logs/", headers=headers)
        ws.scope["client"] = (address, 40000)
        connected, code = await ws.connect(timeout=5)
        if connected:
            closed = await ws.receive_output(timeout=5)
            code = closed.get("code")
        codes.append(code)
        await ws.disconnect()
    assert codes[-1] == CLOSE_RATE_LIMITED
    assert CLOSE_RATE_LIMITED not in codes[:limit]


@pytest.mark.django_db
def test_guessed_api_keys_on_the_logs_reader_are_answered_429_past_the_limit(limit):
    guesser = Client(REMOTE_ADDR=an_address(), HTTP_X_EULER_API_KEY=GUESS)
    codes = [guesser.get("/api/v1/jobs/1/logs").status_code for _ in range(limit + 1)]
    assert codes == [401] * limit + [429]
