"""`GET /api/v1/jobs/{id}/wait`: the blocking read of a job returns when its state moves, woken by the job's own state
broadcast; at once when it has already moved; with the job as it stands when the timeout passes first."""

from __future__ import annotations

import asyncio
import json

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient
from django.utils import timezone

from euler.errors import InvalidInput
from jobs.api.wait import Wait, moved, parse_wait

pytestmark = pytest.mark.django_db(transaction=True)


def make_queued(project):
    from jobs.models import Job

    return Job.objects.create(project=project, name="hello", image="euler-test/busybox", command=["true"],
                              cpu_milli=100, memory_bytes=64 << 20, timeout_seconds=60, state="queued",
                              queued_at=timezone.now())  # fmt: skip


def cancel(job, project):
    from jobs import services

    services.job_cancel(job_id=job.pk, project=project)


class Answer:
    """What the tests read of an answer: its status, headers (by name) and JSON body."""

    def __init__(self, status: int, headers: dict[str, str], body: bytes):
        self.status_code, self.headers, self.content = status, headers, body

    def __getitem__(self, name: str) -> str:
        return self.headers[name.lower()]

    def json(self):
        return json.loads(self.content)


async def wait(api_key: str, job_id: int, query: str = "") -> Answer:
    """The blocking read through the web's own HTTP application (config/asgi.py's Django part): the sync-view handler
    that waits on the event loop after the middleware chain (euler.synchandler.Deferred), as a web process serves it
    (Django's test clients would run the view on a thread of theirs and wait there)."""
    from django.core.asgi import get_asgi_application

    from euler.synchandler import route_sync_views

    app = route_sync_views(get_asgi_application())
    sent: list[dict] = []
    incoming = [{"type": "http.request", "body": b"", "more_body": False}]

    async def receive():
        if incoming:
            return incoming.pop(0)
        await asyncio.Event().wait()  # the client stays

    async def send(message):
        sent.append(message)

    path = f"/api/v1/jobs/{job_id}/wait"
    scope = {"type": "http", "method": "GET", "path": path, "raw_path": path.encode(),
             "query_string": query.lstrip("?").encode(), "headers": [(b"host", b"testserver"),
             (b"x-euler-api-key", api_key.encode())], "client": ("127.0.0.1", 5555), "server": ("testserver", 80),
             "scheme": "http", "http_version": "1.1", "root_path": "", "asgi": {"version": "3.0"}}  # fmt: skip
    await app(scope, receive, send)
    headers = {k.decode().lower(): v.decode() for k, v in sent[0]["headers"]}
    return Answer(sent[0]["status"], headers, b"".join(m.get("body", b"") for m in sent[1:]))


async def joined(job_id: int) -> None:
    """Until a waiter is a member of the job's broadcast group: a move after that can only reach it that way."""
    from channels.layers import get_channel_layer

    from jobs.broadcast import group_name

    layer = get_channel_layer()  # the tests' in-memory layer (the e2e tests follow jobs through channels_redis)
    while not layer.groups.get(group_name(job_id)):
        await asyncio.sleep(0.01)


# --- the decision ---------------------------------------------------------------------------------------------------
def test_without_a_state_only_an_end_ends_the_wait_and_with_one_any_other_state_does():
    assert [moved(s, Wait(None, 1)) for s in ("queued", "running", "succeeded", "lost")] == [False, False, True, True]
    assert [moved(s, Wait("queued", 1)) for s in ("queued", "assigned", "cancelled")] == [False, True, True]


@pytest.mark.parametrize(
    ("query", "code"),
    [({"state": "bogus"}, "invalid_state"), ({"timeout": "-1"}, "invalid_timeout"), ({"timeout": "61"}, "invalid_timeout"),
     ({"timeout": "soon"}, "invalid_timeout"), ({"timeout": "nan"}, "invalid_timeout"), ({"timeout": "inf"}, "invalid_timeout")],
)  # fmt: skip
def test_a_bad_state_or_timeout_is_refused_with_its_code(query, code):
    with pytest.raises(InvalidInput) as caught:
        parse_wait(query)
    assert caught.value.code == code


def test_the_defaults_wait_30_s_for_the_end():
    assert parse_wait({}) == Wait(None, 30.0)
    assert parse_wait({"state": "running", "timeout": "0.5"}) == Wait("running", 0.5)


# --- the view -------------------------------------------------------------------------------------------------------
async def test_a_wait_on_a_queued_job_returns_the_cancelled_job_once_it_is_cancelled(api_key, project, api):
    job = await sync_to_async(make_queued)(project)
    waiting = asyncio.ensure_future(wait(api_key, job.pk, "?state=queued&timeout=60"))
    await asyncio.wait_for(joined(job.pk), timeout=30)  # subscribed: the cancel reaches it by broadcast or re-read
    assert not waiting.done()
    await sync_to_async(cancel)(job, project)
    response = await asyncio.wait_for(waiting, timeout=60)
    assert (response.status_code, response["X-Euler-Wait"], response.json()["state"]) == (200, "moved", "cancelled")
    detail = await sync_to_async(api.get)(f"/api/v1/jobs/{job.pk}")
    assert response.json() == detail.json()  # the same body as GET /api/v1/jobs/{id}


async def test_the_broadcast_alone_wakes_the_wait(api_key, project):
    """No row changes: only the job's state broadcast can end this wait before its 60 s."""
    from channels.layers import get_channel_layer

    from jobs.broadcast import group_name

    job = await sync_to_async(make_queued)(project)
    waiting = asyncio.ensure_future(wait(api_key, job.pk, "?state=queued&timeout=60"))
    await asyncio.wait_for(joined(job.pk), timeout=30)
    message = {"type": "job.state", "state": "assigned", "terminal": False, "node": "n1"}
    while not waiting.done():  # until the wait is past its re-read of the row and listening: sent again meanwhile
        await get_channel_layer().group_send(group_name(job.pk), message)
        await asyncio.wait({waiting}, timeout=0.2)
    response = waiting.result()
    assert (response["X-Euler-Wait"], response.json()["state"]) == ("moved", "queued")  # the row says queued still


async def test_a_wait_for_the_end_returns_on_the_end(api_key, project):
    job = await sync_to_async(make_queued)(project)
    waiting = asyncio.ensure_future(wait(api_key, job.pk, "?timeout=60"))
    await asyncio.wait_for(joined(job.pk), timeout=30)
    await sync_to_async(cancel)(job, project)
    response = await asyncio.wait_for(waiting, timeout=60)
    assert (response["X-Euler-Wait"], response.json()["state"]) == ("moved", "cancelled")


async def test_a_job_that_already_moved_answers_at_once_and_a_timeout_answers_the_job_as_it_stands(api_key, project):
    job = await sync_to_async(make_queued)(project)
    response = await wait(api_key, job.pk, "?state=running&timeout=60")
    assert (response["X-Euler-Wait"], response.json()["state"]) == ("moved", "queued")
    response = await wait(api_key, job.pk, "?state=queued&timeout=0.3")
    assert (response.status_code, response["X-Euler-Wait"], response.json()["state"]) == (200, "timeout", "queued")
    response = await wait(api_key, job.pk, "?timeout=0")
    assert (response["X-Euler-Wait"], response.json()["state"]) == ("timeout", "queued")


async def test_bad_input_is_a_400_another_projects_job_a_404_and_no_key_a_401(api_key, other_api_key, project):
    job = await sync_to_async(make_queued)(project)
    response = await wait(api_key, job.pk, "?state=asleep")
    assert (response.status_code, response.json()["code"]) == (400, "invalid_state")
    response = await wait(api_key, job.pk, "?timeout=600")
    assert (response.status_code, response.json()["code"]) == (400, "invalid_timeout")
    response = await wait(other_api_key, job.pk, "?timeout=1")
    assert (response.status_code, response.json()["code"]) == (404, "not_found")
    response = await wait(api_key, 987654, "?timeout=1")
    assert response.status_code == 404
    response = await AsyncClient().get(f"/api/v1/jobs/{job.pk}/wait")
    assert response.status_code == 401
    response = await AsyncClient().post(f"/api/v1/jobs/{job.pk}/wait", headers={"X-Euler-API-Key": api_key})
    assert response.status_code == 405


class Mute:
    """A channel layer that carries nothing: only the direct path of this process (jobs.broadcast) remains."""

    async def group_send(self, group: str, message: dict) -> None:
        pass


async def test_a_move_made_in_this_process_wakes_the_wait_without_the_channel_layer(api_key, project):
    from jobs import broadcast

    job = await sync_to_async(make_queued)(project)
    waiting = asyncio.ensure_future(wait(api_key, job.pk, "?state=queued&timeout=60"))
    await asyncio.wait_for(joined(job.pk), timeout=30)
    while not waiting.done():  # until the wait is past its re-read of the row and listening: told again meanwhile
        await broadcast._send_all(Mute(), [(job.pk, "assigned", "n1")])
        await asyncio.wait({waiting}, timeout=0.2)
    response = waiting.result()
    assert (response["X-Euler-Wait"], response.json()["state"]) == ("moved", "queued")  # the row says queued still
    assert not broadcast._here  # the wait stopped listening
