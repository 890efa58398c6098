"""`client.jobs.moved`: one blocking read of a job, its wait kept under the client's own read timeout."""

from __future__ import annotations

import httpx
from euler_client.client import Client


def reads(**kwargs) -> tuple[list[httpx.Request], Client]:
    sent: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, json={"id": 42, "state": "running"})

    client = Client("http://euler.test", "euler_pk_test", transport=httpx.MockTransport(answer), **kwargs)
    return sent, client


def test_it_asks_for_the_move_from_the_state_seen_and_returns_the_job():
    sent, client = reads()
    assert client.jobs.moved(42, state="queued", timeout=10)["state"] == "running"
    (request,) = sent
    assert request.url.path == "/api/v1/jobs/42/wait"
    assert dict(request.url.params) == {"state": "queued", "timeout": "10"}


def test_without_a_state_it_waits_for_the_end_and_never_past_its_own_read_timeout():
    sent, client = reads(timeout=12.0)
    client.jobs.moved(42, timeout=60)
    assert dict(sent[0].url.params) == {"timeout": "7"}  # 5 s under the client's 12 s read timeout
